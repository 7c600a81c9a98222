-- signals_prune: deletes up to ?1 signals whose job no longer exists.
-- Parameters: ?1 batch.
DELETE FROM job_signals
WHERE rowid IN (SELECT g.rowid FROM job_signals AS g
                WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id)
                LIMIT ?1)
