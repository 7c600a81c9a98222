-- search_finished: search (see search.sql) for succeeded or cancelled jobs, newest finished first.
-- Parameters: as search.sql ($3 is succeeded or cancelled; $13 the cursor: the last
--   job of the previous page, whose (finished_at, id) the page continues below), and
--   $16 timestamptz that job's finished_at (looked up when NULL: a link from before).
-- The finished time is carried, not only looked up: a bulk replay walking these pages turns
-- the cursor job pending, and its finished_at is gone by the next page.
-- Kept successes live packed in jobs_succeeded (migration 0035) and are read from there too:
-- its history rows newest finished first (index jobs_succeeded_finished), each one's jobs
-- filtered like the table's. One history row's jobs share its finished_at.
-- Ordered by (finished_at, id) so the partial index jobs_finished_idx (state, finished_at)
-- serves it: by id, the newest ids of a busy table are pending, and a backward scan of the
-- primary key would walk past every one of them before the first finished job.
WITH cur AS (
    SELECT coalesce($16::timestamptz,
                    (SELECT c.finished_at FROM {{schema}}.jobs c WHERE c.id = $13),
                    (SELECT k.finished_at FROM {{schema}}.kept_job($13) AS k)) AS at
)
SELECT * FROM (
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
  AND finished_at IS NOT NULL
  AND ($13::bigint IS NULL OR (finished_at, id) < ((SELECT at FROM cur), $13))
ORDER BY finished_at DESC, id DESC
LIMIT $14
) AS live
UNION ALL
SELECT * FROM (
SELECT r.id, r.queue, r.kind, 'succeeded'::text, r.attempt, r.max_attempts, r.released,
       r.priority, r.run_at, r.created_at, r.attempted_at, h.finished_at, NULL::text,
       NULL::timestamptz, r.cancel_requested_at, r.unique_key, r.ordering_key,
       r.concurrency_key, false, r.args, r.metadata, r.errors
FROM {{schema}}.jobs_succeeded AS h, unnest(h.jobs) AS r
WHERE $3::text = 'succeeded'
  AND ($1::text IS NULL OR h.queue = $1)
  AND ($13::bigint IS NULL OR h.finished_at <= (SELECT at FROM cur))
  AND ($2::text IS NULL OR r.kind = $2)
  AND ($4::smallint IS NULL OR r.priority = $4)
  AND ($5::timestamptz IS NULL OR r.created_at >= $5)
  AND ($6::timestamptz IS NULL OR r.created_at < $6)
  AND ($7::text IS NULL OR r.ordering_key = $7)
  AND ($8::text IS NULL OR r.concurrency_key = $8)
  AND ($9::text[] IS NULL OR r.args #> $9 = $10::jsonb)
  AND ($11::text[] IS NULL OR r.metadata #> $11 = $12::jsonb)
  AND ($15::text IS NULL OR r.errors -> -1 ->> 'message' = $15)
  AND ($13::bigint IS NULL OR (h.finished_at, r.id) < ((SELECT at FROM cur), $13))
ORDER BY h.finished_at DESC, r.id DESC
LIMIT $14
) AS kept
ORDER BY finished_at DESC, id DESC
LIMIT $14
