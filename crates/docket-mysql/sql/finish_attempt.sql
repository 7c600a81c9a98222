-- finish_attempt: ends a running attempt (failure report or reaped lease), locked by this
-- transaction, with the state the caller decided.
-- Parameters: ?1 id, ?2 state, ?3 run_at (ms, NULL keeps it), ?4 finished_at (ms or NULL),
--   ?5 errors (JSON), ?6 attempt (the fence, unchanged since it was read and locked), ?7
--   whether the lease must still hold now (1 for a failure report: checked again by
--   SYSDATE(3), so a late report is refused; 0 for the reaper, which ends expired leases).
UPDATE jobs
SET state = ?2,
    run_at = COALESCE(?3, run_at),
    finished_at = ?4,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = ?5
WHERE id = ?1 AND state = 'running' AND attempt = ?6
  AND (?7 = 0 OR lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED))
