-- candidates_ready: ready jobs of a queue in claim order (priority, run_at, id), locked;
-- jobs another claim holds are skipped, never waited for.
-- Parameters: queue, now (ms), how many. Served by jobs_claim.
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE queue = ? AND state = 'pending' AND run_at <= ?
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
