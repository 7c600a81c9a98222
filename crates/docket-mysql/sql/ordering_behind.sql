-- ordering_behind: whether job ? of ordering key ? must wait: an older job of the key is
-- unfinished or dead, or a job of the key is running. Parameters: key, id, key.
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE ordering_key = ?1 AND state IN ('pending', 'running', 'dead') AND id < ?2)
    OR EXISTS (SELECT 1 FROM jobs WHERE ordering_key = ?1 AND state = 'running')
