-- complete_apply: marks succeeded the jobs fenced_select kept (locked by this transaction).
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Parameters: now (ms), owner, then the ids (/*ids*/ expanded).
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'succeeded', finished_at = ?, lease_owner = NULL, lease_expires_at = NULL
WHERE lease_owner = ? AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (/*ids*/)
