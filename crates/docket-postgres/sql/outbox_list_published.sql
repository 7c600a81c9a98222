-- outbox_list_published: published messages still kept, newest first.
-- Parameters: $1 bigint limit.
-- Returns: as outbox_list.
SELECT id, subject, key, attempt, errors, last_error, created_at, published_at, stream_seq,
       payload::text AS payload
FROM {{schema}}.outbox
WHERE published_at IS NOT NULL
ORDER BY published_at DESC, id DESC
LIMIT $1
