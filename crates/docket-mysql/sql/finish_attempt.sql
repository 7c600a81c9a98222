-- finish_attempt: ends a running attempt (failure report or reaped lease), locked by this
-- transaction, with the state the caller decided.
-- Parameters: state, run_at (ms, NULL keeps it), finished_at (ms or NULL), errors (JSON),
--   id, attempt (the fence, unchanged since it was read and locked), and whether the lease
--   must still hold now (1 for a failure report: checked again by SYSDATE(3), so a late
--   report is refused; 0 for the reaper, which ends expired leases).
UPDATE jobs
SET state = ?,
    run_at = COALESCE(?, run_at),
    finished_at = ?,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = ?
WHERE id = ? AND state = 'running' AND attempt = ?
  AND (? = 0 OR lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED))
