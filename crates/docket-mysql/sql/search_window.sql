-- search_window: search with a filter no index serves, over a bounded window: matches among
-- the newest jobs below the cursor down to the window's lowest id (search_window_scan.sql).
-- Parameters (NULL: no filter): ?1 queue, ?2 kind, ?3 state, ?4 priority, ?5 created since (ms),
--   ?6 created before (ms), ?7 ordering_key, ?8 concurrency_key, ?9 JSON path into args,
--   ?10 the args value there (minified JSON text), ?11/?12 the same for metadata, ?13 keyset:
--   ids below it, ?14 page size + 1, ?15 the last error's message, ?16 the cursor's
--   finished_at (search_finished), ?17 the window's lowest id (search_window), ?18 a part of
--   the pending jobs ('retrying': an error history; 'scheduled': not due at ?19, now in ms).
-- Every value is bound; paths are built from quoted keys by the caller.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors
FROM jobs
WHERE (?1 IS NULL OR queue = ?1)
  AND (?2 IS NULL OR kind = ?2)
  AND (?3 IS NULL OR state = ?3)
  AND (?18 IS NULL OR (?18 = 'retrying' AND JSON_LENGTH(errors) > 0) OR (?18 = 'scheduled' AND run_at > ?19))
  AND (?4 IS NULL OR priority = ?4)
  AND (?5 IS NULL OR created_at >= ?5)
  AND (?6 IS NULL OR created_at < ?6)
  AND (?7 IS NULL OR ordering_key = ?7)
  AND (?8 IS NULL OR concurrency_key = ?8)
  AND (?9 IS NULL OR CAST(JSON_EXTRACT(args, ?9) AS BINARY) = CAST(JSON_EXTRACT(?10, '$') AS BINARY))
  AND (?11 IS NULL OR CAST(JSON_EXTRACT(metadata, ?11) AS BINARY) = CAST(JSON_EXTRACT(?12, '$') AS BINARY))
  AND (?15 IS NULL OR (JSON_LENGTH(errors) > 0 AND JSON_UNQUOTE(JSON_EXTRACT(errors,
        CONCAT('$[', JSON_LENGTH(errors) - 1, '].message'))) = ?15))
  AND (?13 IS NULL OR id < ?13) AND id >= ?17
ORDER BY id DESC
LIMIT ?14
