-- get: one whole job, for operators.
-- Parameters: $1 bigint id.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
       attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
       unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors
FROM {{schema}}.jobs
WHERE id = $1
