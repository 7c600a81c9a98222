-- candidates_starving: jobs of queue ?1 ready since before ?2 (now minus the starvation
-- bound), oldest first, whatever their priority: the claim takes them first.
-- Parameters: ?1 queue, ?2 the bound's instant (ms), ?3 how many. Served by jobs_age_idx.
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
ORDER BY run_at, id
LIMIT ?3
