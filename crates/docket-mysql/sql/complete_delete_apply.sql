-- complete_delete_apply: completes by deleting them the jobs fenced_select.sql kept (locked by
-- this transaction) — a worker that does not keep succeeded jobs.
-- The lease is checked again here, by SYSDATE(3) when the row is reached: a delete that comes
-- late (a slow process between the locked read and this statement) is refused, never
-- accepted after its lease. Ordering and concurrency keys need no release: this engine decides
-- them at claim time from the rows that are left, and a deleted row holds no key.
-- Parameters: ?1 owner, ?2 the ids (a list: one placeholder each).
DELETE FROM jobs
WHERE lease_owner = ?1 AND state = 'running' AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
  AND id IN (?2)
