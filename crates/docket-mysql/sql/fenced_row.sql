-- fenced_row: what a failure report needs of one claimed job, locked, only while the claim
-- holds. Parameters: id, attempt, owner, now (ms).
SELECT attempt, max_attempts, cancel_requested_at, errors, backoff_base_ms, backoff_cap_ms,
       lease_owner, queue
FROM jobs
WHERE id = ? AND attempt = ? AND lease_owner = ? AND lease_expires_at > ?
FOR UPDATE
