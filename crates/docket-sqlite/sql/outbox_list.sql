-- outbox_list: unpublished messages oldest first; ?1 = 1 for only those whose last publish
-- failed.
-- Parameters: ?1 failing only (0/1), ?2 limit.
SELECT id, subject, key, attempt, errors, last_error, created_at, published_at, stream_seq, payload
FROM outbox
WHERE published_at IS NULL AND (?1 = 0 OR errors > 0)
ORDER BY id
LIMIT ?2
