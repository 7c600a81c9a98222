-- key_running: running jobs of concurrency key ?1, across every queue.
-- Parameters: ?1 key. Served by jobs_concurrency_running_idx.
SELECT count(*) FROM jobs WHERE state = 'running' AND concurrency_key = ?1
