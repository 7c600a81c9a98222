-- workers_recent: live workers and those gone (stopped, or expired without a word) since ?2,
-- the latest report first, the leader marked. Parameters: ?1 now (ms), ?2 since (ms).
SELECT w.owner, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.buffered, w.buffered_by_queue,
       w.started_at, w.seen_at,
       w.expires_at, w.stopped_at,
       EXISTS (SELECT 1 FROM leader l WHERE l.owner = w.owner AND l.expires_at > ?1) AS leader
FROM workers w
WHERE w.expires_at > ?2 OR w.stopped_at > ?2
ORDER BY w.seen_at DESC, w.owner
