-- why_ordering: the earliest job of ordering key ?1 that holds job ?2 back: an older one that
-- is unfinished or dead, or one that is running. Parameters: ?1 ordering_key, ?2 id.
SELECT id, state FROM jobs
WHERE ordering_key = ?1 AND id <> ?2
  AND ((id < ?2 AND state NOT IN ('succeeded', 'cancelled')) OR state = 'running')
ORDER BY id
LIMIT 1
