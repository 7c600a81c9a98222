-- signals_prune: deletes up to ?1 signals whose job no longer exists.
-- Parameters: ?1 batch.
DELETE FROM job_signals
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_signals.job_id)
LIMIT ?1
