-- fenced_row: what a failure report needs of one claimed job, locked, only while the claim
-- holds (the lease judged by SYSDATE(3), after any lock wait: see fenced_select.sql).
-- Parameters: id, attempt, owner.
SELECT attempt, released, max_attempts, cancel_requested_at, errors, backoff_base_ms, backoff_cap_ms,
       lease_owner, queue, workflow_id, batch_id
FROM jobs
WHERE id = ? AND attempt = ? AND lease_owner = ? AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
FOR UPDATE
