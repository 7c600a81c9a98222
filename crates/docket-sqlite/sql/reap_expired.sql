-- reap_expired: running jobs whose lease expired before ?1, oldest expiry first.
-- Parameters: ?1 now (ms), ?2 batch. Served by jobs_lease_idx (a scan of the running set).
SELECT id, attempt, released, max_attempts, cancel_requested_at, errors, backoff_base_ms, backoff_cap_ms,
       lease_owner, queue, workflow_id, batch_id
FROM jobs
WHERE state = 'running' AND lease_expires_at < ?1
ORDER BY lease_expires_at
LIMIT ?2
