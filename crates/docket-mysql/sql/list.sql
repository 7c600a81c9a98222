-- list: jobs newest first, optionally of one queue and one state.
-- Parameters: ?1 queue, ?2 state (each NULL for no filter), ?3 limit.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors
FROM jobs
WHERE (?1 IS NULL OR queue = ?1) AND (?2 IS NULL OR state = ?2)
ORDER BY id DESC
LIMIT ?3
