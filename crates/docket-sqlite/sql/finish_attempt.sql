-- finish_attempt: ends a running attempt (failure report or reaped lease) with the state the
-- caller decided: pending again at ?3 (retry), or dead / cancelled with finished_at ?4.
-- Parameters: ?1 id, ?2 state, ?3 run_at (ms, NULL keeps it), ?4 finished_at (ms or NULL),
--   ?5 errors (JSON array text), ?6 attempt (the fence: unchanged since fenced_row or
--   reap_expired read it in this transaction).
UPDATE jobs
SET attempt = ?6,
    state = ?2,
    run_at = coalesce(?3, run_at),
    finished_at = ?4,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = ?5
WHERE id = ?1 AND state = 'running' AND attempt = ?6
