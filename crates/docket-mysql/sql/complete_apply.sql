-- complete_apply: marks succeeded the jobs fenced_select kept (locked by this transaction).
-- The lease is checked again here, by SYSDATE(3) when the row is written: a write that comes
-- late (a slow process between the fenced read and this statement) is refused, never
-- accepted after its lease.
-- Parameters: ?1 now (ms), ?2 owner, ?3 the ids (a list: one placeholder each).
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'succeeded', finished_at = ?1, lease_owner = NULL, lease_expires_at = NULL
WHERE lease_owner = ?2 AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (?3)
