-- candidates_ready: ready jobs of queue ?1 in claim order (priority, then run_at, then id).
-- One row: a JSON array of [id, ordering_key, concurrency_key] in order (one row crosses
-- to the async side instead of one per job: each row is a thread hand-off in sqlx-sqlite).
-- Parameters: ?1 queue, ?2 now (ms), ?3 how many.
-- INDEXED BY: its order is the claim order, so a claim reads LIMIT rows; without the hint the planner
-- took an index in run_at order (since dropped) and sorted every ready job (1.6 ms a claim at 20,000).
-- Served by jobs_claim_idx. Only read inside the claim's write transaction.
SELECT json_group_array(json_array(id, ordering_key, concurrency_key)) FROM (
SELECT id, ordering_key, concurrency_key
FROM jobs INDEXED BY jobs_claim_idx
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3
)
