-- get: one whole job row, with its last progress (lists leave that out). Parameters: id.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors, progress_percent, progress_message,
       progress_at
FROM jobs WHERE id = ?
