-- search: one keyset page of jobs matching every filter given, newest first (by id).
-- Parameters, each filter given twice (NULL: no filter) in this order: queue, kind, state,
--   priority, created since (ms), created before (ms), ordering_key, concurrency_key, the
--   args path ($."k1"."k2") twice and the value there (JSON text), the same for
--   metadata, the last error's message; then as the statement says.
-- Every value is bound; paths are built from quoted keys by the caller. Then: keyset id (twice), page size + 1.
SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at, attempted_at,
       finished_at, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key,
       concurrency_key, blocked, args, metadata, errors
FROM jobs
WHERE (? IS NULL OR queue = ?)
  AND (? IS NULL OR kind = ?)
  AND (? IS NULL OR state = ?)
  AND (? IS NULL OR priority = ?)
  AND (? IS NULL OR created_at >= ?)
  AND (? IS NULL OR created_at < ?)
  AND (? IS NULL OR ordering_key = ?)
  AND (? IS NULL OR concurrency_key = ?)
  AND (? IS NULL OR CAST(JSON_EXTRACT(args, ?) AS BINARY) = CAST(JSON_EXTRACT(?, '$') AS BINARY))
  AND (? IS NULL OR CAST(JSON_EXTRACT(metadata, ?) AS BINARY) = CAST(JSON_EXTRACT(?, '$') AS BINARY))
  AND (? IS NULL OR (JSON_LENGTH(errors) > 0 AND JSON_UNQUOTE(JSON_EXTRACT(errors,
        CONCAT('$[', JSON_LENGTH(errors) - 1, '].message'))) = ?))
  AND (? IS NULL OR id < ?)
ORDER BY id DESC
LIMIT ?
