-- periodic_job: remember the job of the last tick of $1 (in the advancing transaction).
-- Parameters: $1 text name, $2 bigint job id.
UPDATE {{schema}}.periodic SET last_job_id = $2 WHERE name = $1
