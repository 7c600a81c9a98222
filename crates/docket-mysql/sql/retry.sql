-- retry: replays a dead or cancelled job now with more claims, keeping id and history.
-- Parameters: now (ms), extra attempts (1..1000), id.
UPDATE jobs
SET state = 'pending', run_at = ?, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = attempt + ?
WHERE id = ? AND state IN ('dead', 'cancelled')
