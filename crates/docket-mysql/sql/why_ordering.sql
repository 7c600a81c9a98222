-- why_ordering: the earliest job of the ordering key that holds job ? back: an older one
-- that is unfinished or dead, or one that is running. Parameters: key, id, id.
SELECT id, state FROM jobs
WHERE ordering_key = ?1 AND id <> ?2
  AND ((id < ?2 AND state IN ('pending', 'running', 'dead')) OR state = 'running')
ORDER BY id
LIMIT 1
