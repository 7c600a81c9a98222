-- candidates_ready: ready jobs of queue ?1 in claim order (priority, then run_at, then id).
-- Parameters: ?1 queue, ?2 now (ms), ?3 how many.
-- Served by jobs_claim_idx. Only read inside the claim's write transaction.
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3
