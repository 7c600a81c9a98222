-- claimed_rows: what a worker needs of the jobs this transaction just leased to it.
-- Parameters: ?1 the ids (a list: one placeholder each), ?2 owner.
SELECT id, attempt, max_attempts, queue, kind, args, metadata, priority, run_at, created_at,
       lease_expires_at, released
FROM jobs
WHERE lease_owner = ?2 AND id IN (?1)
