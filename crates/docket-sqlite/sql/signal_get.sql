-- signal_get: the payload of one signal sent to a job.
-- Parameters: ?1 job id, ?2 signal name.
SELECT payload FROM job_signals WHERE job_id = ?1 AND name = ?2
