-- workers_recent: live workers and those gone (stopped, or expired without a word) within the
-- last $1 milliseconds, the latest report first, the leader marked; and each row's stop.
-- Parameters: $1 bigint window_ms. The table holds a row per worker process of the last day.
SELECT w.owner, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.buffered, w.buffered_by_queue,
       w.started_at, w.seen_at,
       w.expires_at, w.stopped_at,
       EXISTS (SELECT 1 FROM {{schema}}.leader l
               WHERE l.owner = w.owner AND l.expires_at > now()) AS leader
FROM {{schema}}.workers w
WHERE w.expires_at > now() - $1 * interval '1 millisecond'
   OR w.stopped_at > now() - $1 * interval '1 millisecond'
ORDER BY w.seen_at DESC, w.owner
