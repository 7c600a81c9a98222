-- outbox_prune: published messages older than the retention, oldest first, at most ?2.
-- Parameters: ?1 published before (ms), ?2 limit.
DELETE FROM outbox WHERE published_at < ?1 ORDER BY published_at LIMIT ?2
