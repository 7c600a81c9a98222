-- depth_fresh: jobs enqueued since the previous depth sample, by queue: ids above its mark
-- and at most the mark now, read from the primary key (work in proportion to the minute's
-- enqueues). Deleted jobs are not counted.
-- Parameters: ?1 the previous mark, ?2 the mark now.
SELECT queue, count(*) AS n FROM jobs WHERE id > ?1 AND id <= ?2 GROUP BY queue
