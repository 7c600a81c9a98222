-- search_window: search (see search.sql) with a filter no index serves (kind, priority, a
-- time range, a JSON path, the last error), over a bounded window: the next $16 jobs below
-- the cursor in id order, whatever their queue or state (so the work is bounded by the
-- window, not by how rare a match is), newest first, and the matches among them.
-- Parameters: as search.sql, $16 bigint the window, and $17 text a part of the pending jobs:
--   'retrying' (an error history) or 'scheduled' (not due yet), NULL for all.
-- Returns one row at least: `scanned` (jobs in the window) and `scan_end` (its lowest id, the
-- cursor to go on from) on every row, and a job's columns on each match (none: id is NULL).
-- Without the window such a filter scans the whole table for a rare value (5 s at 11 M jobs);
-- with it a page costs at most one window, and the page says how far it looked.
WITH w AS MATERIALIZED (
    SELECT id, queue, state, ordering_key, concurrency_key, kind, priority, created_at,
           CASE WHEN $9::text[] IS NULL THEN NULL ELSE args #> $9 END AS av,
           CASE WHEN $11::text[] IS NULL THEN NULL ELSE metadata #> $11 END AS mv,
           CASE WHEN $15::text IS NULL THEN NULL ELSE errors -> -1 ->> 'message' END AS em,
           CASE WHEN $17::text = 'retrying' THEN errors <> '[]'::jsonb END AS errored,
           run_at
    FROM {{schema}}.jobs
    WHERE ($13::bigint IS NULL OR id < $13)
    ORDER BY id DESC
    LIMIT $16
),
m AS (
    SELECT id FROM w
    WHERE ($1::text IS NULL OR queue = $1)
      AND ($3::text IS NULL OR state = $3)
      AND ($17::text IS NULL OR ($17 = 'retrying' AND errored) OR ($17 = 'scheduled' AND run_at > now()))
      AND ($7::text IS NULL OR ordering_key = $7)
      AND ($8::text IS NULL OR concurrency_key = $8)
      AND ($2::text IS NULL OR kind = $2)
      AND ($4::smallint IS NULL OR priority = $4)
      AND ($5::timestamptz IS NULL OR created_at >= $5)
      AND ($6::timestamptz IS NULL OR created_at < $6)
      AND ($9::text[] IS NULL OR av = $10::jsonb)
      AND ($11::text[] IS NULL OR mv = $12::jsonb)
      AND ($15::text IS NULL OR em = $15)
    ORDER BY id DESC
    LIMIT $14
)
SELECT s.scanned, s.scan_end,
       j.id, j.queue, j.kind, j.state, j.attempt, j.max_attempts, j.released, j.priority, j.run_at, j.created_at,
       j.attempted_at, j.finished_at, j.lease_owner, j.lease_expires_at, j.cancel_requested_at,
       j.unique_key, j.ordering_key, j.concurrency_key, j.blocked, j.args, j.metadata, j.errors
FROM (SELECT count(*) AS scanned, min(id) AS scan_end FROM w) s
LEFT JOIN m ON true
LEFT JOIN {{schema}}.jobs j ON j.id = m.id
ORDER BY j.id DESC NULLS LAST
