-- candidates_starving: jobs of queue ?1 ready since before ?2 (now minus the starvation
-- bound), oldest first, whatever their priority: the claim takes them first.
-- One row: a JSON array of [id, ordering_key, concurrency_key] in order (one row crosses
-- to the async side instead of one per job: each row is a thread hand-off in sqlx-sqlite).
-- Parameters: ?1 queue, ?2 the bound's instant (ms), ?3 how many.
-- Served by jobs_claim_idx alone (queue, priority, run_at, id): `pr` walks the priorities
-- the queue's pending jobs have (one index seek each), and each priority gives its oldest
-- ?3 starving jobs in run_at order, so the ?3 oldest overall are among them. An index in
-- run_at order would answer in one range, but every claim and completion paid for keeping
-- it (8 % of their instructions, counted with callgrind).
WITH RECURSIVE pr(p) AS (
    SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
            WHERE state = 'pending' AND queue = ?1)
    UNION ALL
    SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
            WHERE state = 'pending' AND queue = ?1 AND priority > pr.p)
    FROM pr WHERE pr.p IS NOT NULL
)
SELECT json_group_array(json_array(id, ordering_key, concurrency_key)) FROM (
SELECT j.id, j.ordering_key, j.concurrency_key
FROM pr JOIN jobs AS j ON j.id IN (
    SELECT id FROM jobs INDEXED BY jobs_claim_idx
    WHERE state = 'pending' AND queue = ?1 AND priority = pr.p AND run_at <= ?2
    ORDER BY run_at, id
    LIMIT ?3)
WHERE pr.p IS NOT NULL
ORDER BY j.run_at, j.id
LIMIT ?3
)
