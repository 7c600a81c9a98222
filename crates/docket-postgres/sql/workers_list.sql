-- workers_list: live workers (unexpired by the database's clock), with the leader marked.
-- No parameters.
SELECT w.owner, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.buffered, w.buffered_by_queue,
       w.started_at, w.seen_at,
       w.expires_at,
       EXISTS (SELECT 1 FROM {{schema}}.leader l
               WHERE l.owner = w.owner AND l.expires_at > now()) AS leader
FROM {{schema}}.workers w
WHERE w.expires_at > now() AND w.stopped_at IS NULL
ORDER BY w.started_at, w.owner
