-- depth_list: the leader's per-minute depth samples of the last $1 milliseconds, oldest
-- first, at most $2 rows (the newest kept when more exist).
-- Parameters: $1 bigint window in ms; $2 bigint row limit.
-- Reads the primary key (minute, queue) from the window's start.
SELECT queue, minute, waiting, running, enqueued
FROM (
    SELECT queue, minute, waiting, running, enqueued
    FROM {{schema}}.queue_depth
    WHERE minute >= now() - make_interval(secs => $1 / 1000.0)
    ORDER BY minute DESC, queue
    LIMIT $2
) d
ORDER BY minute, queue
