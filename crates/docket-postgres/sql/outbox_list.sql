-- outbox_list: unpublished messages oldest first; $1 = true for only those whose last
-- publish failed.
-- Parameters: $1 boolean failing only, $2 bigint limit.
-- Returns: id, subject, key, attempt, errors, last_error, created_at, published_at,
--   stream_seq, payload (JSON text).
SELECT id, subject, key, attempt, errors, last_error, created_at, published_at, stream_seq,
       payload::text AS payload
FROM {{schema}}.outbox
WHERE published_at IS NULL AND (NOT $1 OR errors > 0)
ORDER BY id
LIMIT $2
