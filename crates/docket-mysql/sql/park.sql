-- park: puts one claimed job back to pending waiting for signal ?6, fenced like
-- snooze_apply.sql (same attempt, same owner, running, lease unexpired by SYSDATE(3)) and
-- without spending its budget (max_attempts + 1 balances the claim's attempt + 1): due after
-- ?5 ms (its timeout), or at once when the signal is already there. Run after step_fence.sql
-- locked the job's row, as signal_insert.sql's caller does (job_state.sql), and in READ
-- COMMITTED: whichever of the two comes second sees the other, so no signal is missed.
-- Cancelled instead when an operator asked it to stop.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms), ?5 delay (ms), ?6 signal name.
-- Assignments run left to right on these servers: none reads a column set before it.
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE ?4 END,
    run_at = ?4 + CASE WHEN EXISTS (SELECT 1 FROM job_signals WHERE job_id = ?1 AND name = ?6)
                       THEN 0 ELSE ?5 END,
    max_attempts = max_attempts + 1,
    released = released + 1,
    lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = ?1
  AND attempt = ?2
  AND lease_owner = ?3
  AND state = 'running'
  AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
