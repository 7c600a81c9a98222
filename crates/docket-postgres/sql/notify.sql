-- notify: send a wake-up or cancel hint; delivered when the surrounding transaction commits.
-- Parameters: $1 text channel ({{schema}}_wakeup or {{schema}}_cancel), $2 text payload
-- (a queue name or a job id; never job data).
SELECT pg_notify($1, $2)
