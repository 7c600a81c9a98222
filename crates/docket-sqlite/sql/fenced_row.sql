-- fenced_row: what a failure report needs of one claimed job, only while the claim holds
-- (same attempt and owner, lease unexpired at ?4). No row: the lease was lost.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms).
SELECT attempt, released, max_attempts, cancel_requested_at, errors, backoff_base_ms, backoff_cap_ms,
       lease_owner, queue, workflow_id, batch_id
FROM jobs
WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND lease_expires_at > ?4
