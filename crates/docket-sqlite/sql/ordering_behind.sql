-- ordering_behind: whether job ?2 of ordering key ?1 must wait: an older job of the key is
-- unfinished or dead (a dead head holds the key until it is retried or skipped), or a job of
-- the key is running. Parameters: ?1 ordering_key, ?2 id. Served by jobs_ordering_idx.
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE ordering_key = ?1 AND state NOT IN ('succeeded', 'cancelled') AND id < ?2)
    OR EXISTS (SELECT 1 FROM jobs WHERE ordering_key = ?1 AND state = 'running')
