-- why_key_queues: which queues' jobs fill concurrency key ?1 — its running jobs counted per
-- queue, the most first (ties by name), at most five queues.
-- Parameters: ?1 key. Served by jobs_concurrency_running_idx.
SELECT queue, count(*) AS n FROM jobs WHERE state = 'running' AND concurrency_key = ?1
GROUP BY queue ORDER BY n DESC, queue LIMIT 5
