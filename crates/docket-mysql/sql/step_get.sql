-- step_get: one recorded step's output.
-- Parameters: ?1 job id, ?2 step name.
SELECT output FROM job_steps WHERE job_id = ?1 AND name = ?2
