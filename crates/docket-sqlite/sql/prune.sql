-- prune: deletes up to ?4 finished jobs of the states in ?1 that finished before now - keep;
-- a job with an output also before now - the outputs' keep.
-- Parameters: ?1 JSON array of states (only terminal ones are ever deleted), ?2 now (ms),
--   ?3 keep (ms), ?4 batch, ?5 the outputs' keep (ms). Served by jobs_finished_idx.
DELETE FROM jobs
WHERE id IN (SELECT id FROM jobs
             WHERE state IN (SELECT value FROM json_each(?1))
               AND state IN ('succeeded', 'dead', 'cancelled')
               AND finished_at IS NOT NULL
               AND finished_at < ?2 - ?3
               AND (output IS NULL OR finished_at < ?2 - ?5)
             LIMIT ?4)
