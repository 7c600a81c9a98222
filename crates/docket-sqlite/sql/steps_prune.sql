-- steps_prune: deletes up to ?1 step records whose job no longer exists.
-- Parameters: ?1 batch.
DELETE FROM job_steps
WHERE rowid IN (SELECT s.rowid FROM job_steps AS s
                WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = s.job_id)
                LIMIT ?1)
