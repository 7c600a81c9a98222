-- snooze_apply: one fenced (locked) job back to pending at the given time without spending
-- its budget (max_attempts + 1 balances the claim's attempt + 1); cancelled instead when an
-- operator asked it to stop. Parameters: now (ms), run_at (ms), id, attempt.
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Assignments run left to right on these servers: none reads a column set before it.
UPDATE jobs
SET state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE ? END,
    run_at = ?,
    max_attempts = max_attempts + 1,
    released = released + 1,
    lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = ? AND attempt = ? AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
