-- list: jobs newest first, optionally filtered.
-- Parameters: $1 text queue or NULL, $2 text state or NULL, $3 bigint limit.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
       attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
       unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors
FROM {{schema}}.jobs
WHERE ($1::text IS NULL OR queue = $1)
  AND ($2::text IS NULL OR state = $2)
ORDER BY id DESC
LIMIT $3
