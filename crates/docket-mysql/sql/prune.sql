-- prune: deletes up to a batch of finished jobs of the given terminal states that finished
-- before now - keep; a job with an output also before now - the outputs' keep.
-- Parameters: ?1 the states (a list: one placeholder each; only terminal ones are ever
-- deleted), ?2 now (ms), ?3 keep (ms), ?4 batch, ?5 the outputs' keep (ms).
DELETE FROM jobs
WHERE state IN (?1) AND state IN ('succeeded', 'dead', 'cancelled') AND finished_at < ?2 - ?3
  AND (output IS NULL OR finished_at < ?2 - ?5)
ORDER BY finished_at
LIMIT ?4
