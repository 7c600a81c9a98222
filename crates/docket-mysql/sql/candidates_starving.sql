-- candidates_starving: jobs of a queue ready since before the bound's instant, oldest first,
-- locked (SKIP LOCKED). Parameters: queue, the instant (ms), how many. Served by jobs_age.
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE queue = ? AND state = 'pending' AND run_at <= ?
ORDER BY run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
