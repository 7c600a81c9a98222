-- prune: deletes up to a batch of finished jobs of the given terminal states that finished
-- before now - keep. Parameters: ?1 the states (a list: one placeholder each; only terminal
-- ones are ever deleted), ?2 now (ms), ?3 keep (ms), ?4 batch.
DELETE FROM jobs
WHERE state IN (?1) AND state IN ('succeeded', 'dead', 'cancelled') AND finished_at < ?2 - ?3
ORDER BY finished_at
LIMIT ?4
