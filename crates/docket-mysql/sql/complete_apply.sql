-- complete_apply: marks succeeded the jobs fenced_select kept (locked by this transaction).
-- Parameters: now (ms), owner, then the ids (/*ids*/ expanded).
UPDATE jobs
SET state = 'succeeded', finished_at = ?, lease_owner = NULL, lease_expires_at = NULL
WHERE lease_owner = ? AND state = 'running' AND id IN (/*ids*/)
