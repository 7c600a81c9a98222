-- queue_remove: forget queue ?1's control row (pause, limits, rate bucket) when no job of it
-- is pending or running. Parameters: ?1 queue. Run under the queue's lock. Removes nothing
-- when there is no row or work remains; the caller reads the count.
DELETE FROM queues
WHERE name = ?1
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = ?1 AND state IN ('pending', 'running'))
