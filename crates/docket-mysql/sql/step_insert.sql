-- step_insert: records a step. Run only after step_fence.sql found the claim holding the job
-- in the same transaction, and step_get.sql found no step of this name.
-- Parameters: ?1 job id, ?2 step name, ?3 attempt, ?4 output (JSON text), ?5 now (ms).
INSERT INTO job_steps (job_id, name, attempt, output, recorded_at) VALUES (?1, ?2, ?3, ?4, ?5)
