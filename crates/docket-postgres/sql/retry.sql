-- retry: replay a dead or cancelled job now, keeping its id, attempt counter and history.
-- Parameters: $1 bigint id, $2 int extra attempts (>= 1).
-- The budget becomes attempt + extra: exactly `extra` more claims are allowed, whatever was
-- left before (a discarded job may have had budget left; a replay states its own). A unique key already held by another live job raises unique_violation.
UPDATE {{schema}}.jobs
SET state = 'pending',
    run_at = now(),
    finished_at = NULL,
    cancel_requested_at = NULL,
    max_attempts = attempt + $2
WHERE id = $1 AND state IN ('dead', 'cancelled')
RETURNING id
