-- steps_prune: deletes up to ?1 step records whose job no longer exists.
-- Parameters: ?1 batch.
DELETE FROM job_steps
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_steps.job_id)
LIMIT ?1
