-- search_window: search with a filter no index serves, over a bounded window: the ?16 newest
-- jobs below the cursor, filtered. The first row says how many were scanned and the
-- lowest id scanned (the next window starts below it); rows without an id mean no match.
-- Parameters (NULL: no filter): ?1 queue, ?2 kind, ?3 state, ?4 priority, ?5 created since (ms),
--   ?6 created before (ms), ?7 ordering_key, ?8 concurrency_key, ?9 JSON path into args
--   ($."k1"."k2"), ?10 the args value there (minified JSON text), ?11/?12 the same for
--   metadata, ?13 keyset: ids below it, ?14 page size + 1, ?15 the last error's message.
-- Every value is bound; paths are built from quoted keys by the caller.
--   ?16 the window (rows scanned at most).
WITH w AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE (?13 IS NULL OR id < ?13)
    ORDER BY id DESC
    LIMIT ?16
),
m AS (
    SELECT j.id FROM w JOIN jobs j ON j.id = w.id
    WHERE (?1 IS NULL OR j.queue = ?1)
  AND (?2 IS NULL OR j.kind = ?2)
  AND (?3 IS NULL OR j.state = ?3)
  AND (?4 IS NULL OR j.priority = ?4)
  AND (?5 IS NULL OR j.created_at >= ?5)
  AND (?6 IS NULL OR j.created_at < ?6)
  AND (?7 IS NULL OR j.ordering_key = ?7)
  AND (?8 IS NULL OR j.concurrency_key = ?8)
  AND (?9 IS NULL OR j.args -> ?9 = ?10)
  AND (?11 IS NULL OR j.metadata -> ?11 = ?12)
  AND (?15 IS NULL OR json_extract(j.errors, '$[#-1].message') = ?15)
    ORDER BY j.id DESC
    LIMIT ?14
)
SELECT s.scanned, s.scan_end, j.*
FROM (SELECT count(*) AS scanned, min(id) AS scan_end FROM w) s
LEFT JOIN m ON true
LEFT JOIN (SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors FROM jobs) j ON j.id = m.id
ORDER BY j.id IS NULL, j.id DESC
