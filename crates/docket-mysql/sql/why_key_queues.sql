-- why_key_queues: which queues' jobs fill concurrency key ?1 — its running jobs counted per
-- queue, the most first (ties by name), at most five queues.
-- Parameters: ?1 key.
SELECT queue, COUNT(*) AS n FROM jobs WHERE concurrency_key = ?1 AND state = 'running'
GROUP BY queue ORDER BY n DESC, queue LIMIT 5
