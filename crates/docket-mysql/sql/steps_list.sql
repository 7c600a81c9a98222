-- steps_list: the steps a job recorded, oldest first.
-- Parameters: ?1 job id.
SELECT name, attempt, output, recorded_at FROM job_steps WHERE job_id = ?1 ORDER BY recorded_at, name
