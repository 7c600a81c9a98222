-- get: one whole job, for operators, with its last progress (lists leave that out).
-- Parameters: $1 bigint id.
-- A kept success lives packed in jobs_succeeded (migration 0035): kept_job() finds it.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
       attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
       unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors,
       progress_percent, progress_message, progress_at
FROM {{schema}}.jobs
WHERE id = $1
UNION ALL
SELECT (k.job).id, (k.job).queue, (k.job).kind, 'succeeded'::text, (k.job).attempt,
       (k.job).max_attempts, (k.job).released, (k.job).priority, (k.job).run_at,
       (k.job).created_at, (k.job).attempted_at, k.finished_at, NULL::text, NULL::timestamptz,
       (k.job).cancel_requested_at, (k.job).unique_key, (k.job).ordering_key,
       (k.job).concurrency_key, false, (k.job).args, (k.job).metadata, (k.job).errors,
       (k.job).progress_percent, (k.job).progress_message, (k.job).progress_at
FROM {{schema}}.kept_job($1) AS k
LIMIT 1
