-- reap: return up to $1 expired leases to the queue, or to dead when attempts are exhausted.
-- Parameters: $1 bigint batch size.
-- Invariants:
--   * Candidates come from jobs_lease_idx in expiry order, FOR UPDATE SKIP LOCKED: a row
--     being completed right now is locked by its completer and skipped, never overwritten.
--   * The UPDATE re-checks state = running AND lease expired on the locked row version, so a
--     job finished between candidate selection and update is left alone.
--   * A crash consumes the attempt it was claimed with (the claim already counted it).
--   * A job an operator asked to cancel is cancelled rather than requeued.
WITH expired AS (
    SELECT id, lease_owner
    FROM {{schema}}.jobs
    WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN j.attempt >= j.max_attempts THEN 'dead'
                  ELSE 'pending' END,
    run_at = CASE WHEN j.attempt >= j.max_attempts OR j.cancel_requested_at IS NOT NULL THEN j.run_at
                  ELSE now() + {{schema}}.backoff_delay(jsonb_array_length(j.errors) + 1,
                                                        j.backoff_base_ms, j.backoff_cap_ms) END,
    finished_at = CASE WHEN j.attempt >= j.max_attempts OR j.cancel_requested_at IS NOT NULL
                       THEN now() ELSE NULL END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = {{schema}}.push_error(j.errors, jsonb_build_object(
        'attempt', j.attempt - j.released, 'at', now(), 'class', 'lease_expired',
        'message', 'lease expired: the worker crashed, stalled or lost its connection',
        'owner', expired.lease_owner))
FROM expired
WHERE j.id = expired.id
  AND j.state = 'running'
  AND j.lease_expires_at < now()
RETURNING j.id, j.attempt, expired.lease_owner, j.state, j.queue
