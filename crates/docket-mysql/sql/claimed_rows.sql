-- claimed_rows: what a worker needs of the jobs this transaction just leased to it.
-- Parameters: owner, then the ids (/*ids*/ expanded).
SELECT id, attempt, max_attempts, queue, kind, args, metadata, priority, run_at, created_at,
       lease_expires_at, released
FROM jobs
WHERE lease_owner = ? AND id IN (/*ids*/)
