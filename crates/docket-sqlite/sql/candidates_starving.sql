-- candidates_starving: jobs of queue ?1 ready since before ?2 (now minus the starvation
-- bound), oldest first, whatever their priority: the claim takes them first.
-- One row: a JSON array of [id, ordering_key, concurrency_key] in order (one row crosses
-- to the async side instead of one per job: each row is a thread hand-off in sqlx-sqlite).
-- Parameters: ?1 queue, ?2 the bound's instant (ms), ?3 how many. Served by jobs_age_idx.
SELECT json_group_array(json_array(id, ordering_key, concurrency_key)) FROM (
SELECT id, ordering_key, concurrency_key
FROM jobs INDEXED BY jobs_age_idx
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
ORDER BY run_at, id
LIMIT ?3
)
