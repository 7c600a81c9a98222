-- depth_list: the depth samples from minute ?1 on, oldest first, at most ?2 rows (the newest
-- kept when more exist).
-- Parameters: ?1 first minute (ms), ?2 row limit.
SELECT queue, minute_at, waiting, running, enqueued FROM (
    SELECT queue, minute_at, waiting, running, enqueued FROM queue_depth
    WHERE minute_at >= ?1 ORDER BY minute_at DESC, queue LIMIT ?2
) d
ORDER BY minute_at, queue
