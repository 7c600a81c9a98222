-- workers_list: live workers, oldest first, the leader marked. Parameters: now, now (ms).
SELECT w.owner, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.buffered, w.buffered_by_queue,
       w.started_at, w.seen_at,
       w.expires_at,
       EXISTS (SELECT 1 FROM leader l WHERE l.owner = w.owner AND l.expires_at > ?1) AS leader
FROM workers w
WHERE w.expires_at > ?1 AND w.stopped_at IS NULL
ORDER BY w.started_at, w.owner
