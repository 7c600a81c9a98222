-- running_in_queue: running jobs of queue ?1 (the queue's concurrency limit counts them).
-- Parameters: ?1 queue. Served by jobs_lease_idx.
SELECT count(*) FROM jobs WHERE state = 'running' AND queue = ?1
