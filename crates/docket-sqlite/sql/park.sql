-- park: puts one claimed job back to pending waiting for signal ?6, fenced like
-- snooze_many.sql (same attempt, same owner, lease not expired by the database's clock) and
-- without spending its budget (max_attempts + 1 balances the claim's attempt + 1): due after
-- ?5 ms (its timeout), or at once when the signal is already there — read in the same write
-- transaction as any signal_insert.sql, so none is missed. Cancelled instead when an operator
-- asked it to stop.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms), ?5 delay (ms), ?6 signal name.
UPDATE jobs
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
  AND lease_expires_at > ?4
