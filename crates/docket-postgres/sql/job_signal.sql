-- job_signal: the payload of one signal sent to a job.
-- Parameters: $1 bigint job id, $2 text name.
SELECT payload FROM {{schema}}.job_signals WHERE job_id = $1 AND name = $2
