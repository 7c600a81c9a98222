-- outbox_list_published: published messages still kept (moved to outbox_sent by the relay's
-- mark, migration 0034), newest first.
-- Parameters: $1 bigint limit.
-- Returns: as outbox_list.
SELECT id, subject, key, attempt, errors, last_error, created_at, published_at, stream_seq,
       payload::text AS payload
FROM {{schema}}.outbox_sent
ORDER BY published_at DESC, id DESC
LIMIT $1
