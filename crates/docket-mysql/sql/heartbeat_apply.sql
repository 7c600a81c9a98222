-- heartbeat_apply: extends the leases fenced_select kept to the given expiry.
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Parameters: ?1 expiry (ms), ?2 owner, ?3 the ids (a list: one placeholder each).
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
UPDATE jobs FORCE INDEX (PRIMARY) SET lease_expires_at = ?1
WHERE lease_owner = ?2 AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (?3)
