-- heartbeat_apply: extends the leases fenced_select kept to the given expiry.
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Parameters: expiry (ms), owner, then the ids (/*ids*/ expanded).
-- FORCE INDEX (PRIMARY): with stale statistics (a table loaded in one burst) the optimizer
-- reads this through jobs_lease's (state, ...) range instead, locking other claims' rows
-- on the way, and two concurrent claims or completions deadlocked (1213) on the bench.
UPDATE jobs FORCE INDEX (PRIMARY) SET lease_expires_at = ?
WHERE lease_owner = ? AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (/*ids*/)
