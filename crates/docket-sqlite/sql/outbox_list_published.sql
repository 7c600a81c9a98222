-- outbox_list_published: published messages still kept, newest first.
-- Parameters: ?1 limit.
SELECT id, subject, key, attempt, errors, last_error, created_at, published_at, stream_seq, payload
FROM outbox
WHERE published_at IS NOT NULL
ORDER BY published_at DESC, id DESC
LIMIT ?1
