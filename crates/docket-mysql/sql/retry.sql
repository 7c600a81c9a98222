-- retry: replays a dead or cancelled job now with more claims, keeping id and history.
-- Parameters: ?1 id, ?2 now (ms), ?3 extra attempts (1..1000).
UPDATE jobs
SET state = 'pending', run_at = ?2, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = attempt + ?3
WHERE id = ?1 AND state IN ('dead', 'cancelled')
