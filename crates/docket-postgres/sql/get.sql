-- get: one whole job, for operators, with its last progress (lists leave that out).
-- Parameters: $1 bigint id.
-- A kept success lives packed in jobs_succeeded (migration 0035): found through the GiST
-- index on each history row's id range, then picked out of its array.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
       attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
       unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors,
       progress_percent, progress_message, progress_at
FROM {{schema}}.jobs
WHERE id = $1
UNION ALL
SELECT * FROM (
    SELECT r.id, r.queue, r.kind, 'succeeded'::text, r.attempt, r.max_attempts, r.released,
           r.priority, r.run_at, r.created_at, r.attempted_at, h.finished_at, NULL::text,
           NULL::timestamptz, r.cancel_requested_at, r.unique_key, r.ordering_key,
           r.concurrency_key, false, r.args, r.metadata, r.errors, r.progress_percent,
           r.progress_message, r.progress_at
    FROM {{schema}}.jobs_succeeded AS h, unnest(h.jobs) AS r
    WHERE int8range(h.lo, h.hi, '[]') @> $1::bigint
      AND r.id = $1
    LIMIT 1
) AS kept
LIMIT 1
