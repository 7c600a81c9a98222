-- claim_context: everything a claim reads before it chooses, as one row of one statement
-- (each statement is a thread hand-off in sqlx-sqlite and, on a busy machine, a wait for the
-- async side to be scheduled again while the single writer is held: five statements here
-- were ~40 % of a claim's write transaction).
-- Parameters: ?1 queue, ?2 the claim's limit, ?3 the starvation bound in ms (NULL: none).
-- Returns: now (the database's clock, ms; the claim's one instant), the queue's control
-- columns (all NULL without a `queues` row), starving and ready.
--   The depth of both lists: ?2, or ?2 * 4 + 200 (the depth of PostgreSQL's
--     claim_controlled) when a ready job has an ordering or concurrency key (`k`, served by
--     jobs_keyed_ready_idx): the claim then decides keys job by job and looks further
--     ahead, past jobs a key holds back.
--   starving / ready: JSON arrays of [id, ordering_key, concurrency_key] (one value crosses
--     to the async side instead of one row per job). starving: jobs ready since before
--     now - ?3, oldest first, whatever their priority (the claim takes them first); ready:
--     ready jobs in claim order (priority, run_at, id).
-- Invariants: read inside the claim's BEGIN IMMEDIATE transaction, so nothing changes
-- between this read and the lease. Both lists are at the depth the limit allows; a queue
-- whose max_running or rate bucket allows fewer gets a longer list than it uses, and the
-- claim stops at its budget (the lists are prefixes of one order, so the choice is the same
-- as with a shorter read).
-- Index use: INDEXED BY jobs_claim_idx (queue, priority, run_at, id) because its order is
-- the claim order, so `ready` reads LIMIT rows; without the hint the planner took an index
-- in run_at order (since dropped) and sorted every ready job (1.6 ms a claim at 20,000).
-- `starving` uses it too: `pr` walks the priorities the queue's pending jobs have (one
-- index seek each), each priority gives its oldest starving jobs in run_at order, so the
-- oldest overall are among them. An index in run_at order would answer in one range, but
-- every claim and completion paid for keeping it (8 % of their instructions, callgrind).
WITH t(now) AS (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)),
k(keyed) AS (
    SELECT EXISTS (SELECT 1 FROM jobs
                   WHERE state = 'pending' AND queue = ?1 AND run_at <= (SELECT now FROM t)
                     AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL))),
d(depth) AS (SELECT CASE WHEN keyed THEN ?2 * 4 + 200 ELSE ?2 END FROM k),
pr(p) AS (
    SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
            WHERE state = 'pending' AND queue = ?1)
    WHERE ?3 IS NOT NULL
    UNION ALL
    SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
            WHERE state = 'pending' AND queue = ?1 AND priority > pr.p)
    FROM pr WHERE pr.p IS NOT NULL
)
SELECT t.now, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       q.tokens, q.refilled_at,
       (SELECT json_group_array(json_array(id, ordering_key, concurrency_key)) FROM (
            SELECT j.id, j.ordering_key, j.concurrency_key
            FROM pr JOIN jobs AS j ON j.id IN (
                SELECT id FROM jobs INDEXED BY jobs_claim_idx
                WHERE state = 'pending' AND queue = ?1 AND priority = pr.p
                  AND run_at <= (SELECT now FROM t) - ?3
                ORDER BY run_at, id
                LIMIT (SELECT depth FROM d))
            WHERE pr.p IS NOT NULL
            ORDER BY j.run_at, j.id
            LIMIT (SELECT depth FROM d))) AS starving,
       (SELECT json_group_array(json_array(id, ordering_key, concurrency_key)) FROM (
            SELECT id, ordering_key, concurrency_key
            FROM jobs INDEXED BY jobs_claim_idx
            WHERE state = 'pending' AND queue = ?1 AND run_at <= (SELECT now FROM t)
            ORDER BY priority, run_at, id
            LIMIT (SELECT depth FROM d))) AS ready
FROM t LEFT JOIN queues AS q ON q.name = ?1
