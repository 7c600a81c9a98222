-- prune: deletes up to a batch of finished jobs of one terminal state that finished before
-- a time. Parameters: state (succeeded, dead or cancelled), before (ms), batch.
DELETE FROM jobs
WHERE state = ? AND state IN ('succeeded', 'dead', 'cancelled') AND finished_at < ?
ORDER BY finished_at
LIMIT ?
