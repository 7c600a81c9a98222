-- list: jobs newest first, optionally of one queue and one state.
-- Parameters: queue, queue, state, state (each NULL for no filter, given twice), limit.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors
FROM jobs
WHERE (? IS NULL OR queue = ?) AND (? IS NULL OR state = ?)
ORDER BY id DESC
LIMIT ?
