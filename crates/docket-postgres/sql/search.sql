-- search: one keyset page of jobs matching every given filter, newest first.
-- Parameters: $1 text queue, $2 text kind, $3 text state, $4 smallint priority,
--   $5 timestamptz created since (inclusive), $6 timestamptz created until (exclusive),
--   $7 text ordering key, $8 text concurrency key, $9 text[] path into args, $10 jsonb value
--   it must equal, $11 text[] path into metadata, $12 jsonb value, $13 bigint cursor (only
--   ids below it), $14 bigint rows to return (the page plus one, to know there is a next).
--   $15 text the last error's message. Every filter is NULL when not given.
-- Run unprepared (planned with its values): a NULL filter then folds away and the planner
-- picks the partial index its state calls for (jobs_dead_idx, jobs_lease_idx, ...) instead
-- of one generic plan for every combination.
-- Values are bound, never pasted: a JSON path is a text[] parameter and the value a jsonb one.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
       attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
       unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors
FROM {{schema}}.jobs
WHERE ($1::text IS NULL OR queue = $1)
  AND ($2::text IS NULL OR kind = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::smallint IS NULL OR priority = $4)
  AND ($5::timestamptz IS NULL OR created_at >= $5)
  AND ($6::timestamptz IS NULL OR created_at < $6)
  AND ($7::text IS NULL OR ordering_key = $7)
  AND ($8::text IS NULL OR concurrency_key = $8)
  AND ($9::text[] IS NULL OR args #> $9 = $10::jsonb)
  AND ($11::text[] IS NULL OR metadata #> $11 = $12::jsonb)
  AND ($15::text IS NULL OR errors -> -1 ->> 'message' = $15)
  AND ($13::bigint IS NULL OR id < $13)
ORDER BY id DESC
LIMIT $14
