-- reap_expired: running jobs whose lease expired before now, oldest expiry first, locked
-- (SKIP LOCKED: a job a worker is finishing right now is left to it).
-- Parameters: now (ms), batch. Served by jobs_lease.
SELECT id, attempt, released, max_attempts, cancel_requested_at, errors, backoff_base_ms, backoff_cap_ms,
       lease_owner, queue, workflow_id, batch_id
FROM jobs
WHERE state = 'running' AND lease_expires_at < ?
ORDER BY lease_expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED
