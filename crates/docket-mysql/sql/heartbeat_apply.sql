-- heartbeat_apply: extends the leases fenced_select kept to the given expiry.
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Parameters: expiry (ms), owner, then the ids (/*ids*/ expanded).
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
UPDATE jobs FORCE INDEX (PRIMARY) SET lease_expires_at = ?
WHERE lease_owner = ? AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (/*ids*/)
