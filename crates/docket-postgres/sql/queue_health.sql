-- queue_health: per queue, what the overview leaves out: pending jobs that failed before and
-- wait for another attempt (retrying), the oldest running job's age, and the blocked jobs by
-- the reason they wait.
-- Parameters: $1 bigint cap: at most cap + 1 retrying and cap + 1 blocked jobs are read, over
-- all queues (retrying_read and blocked_read tell the caller when a read reached it).
-- Reasons, by the gates claim() and the key sweep apply (in why.sql's order):
--   dead_head        the earliest pending, running or dead job of its ordering key is dead
--                    and before it: nothing behind runs until an operator retries or skips;
--   ordering_behind  an earlier job of its ordering key is pending or running, or one runs;
--   key_limit        its concurrency key runs its limit (the key's own max_running, else its
--                    queue's key_max_running);
--   awaiting_sweep   none of these: the next completion of its key or the sweep frees it.
-- Reads jobs_blocked_idx, jobs_retrying_idx, jobs_ordering_idx (one probe per ordering key),
-- jobs_concurrency_running_idx (one per concurrency key) and jobs_lease_idx.
WITH b AS (
    SELECT id, queue, ordering_key, concurrency_key FROM {{schema}}.jobs
    WHERE state = 'pending' AND blocked
    LIMIT $1 + 1
),
ok AS (
    SELECT k.ordering_key, h.id AS head_id, h.state AS head_state,
           EXISTS (SELECT 1 FROM {{schema}}.jobs r
                   WHERE r.ordering_key = k.ordering_key AND r.state = 'running') AS any_running
    FROM (SELECT DISTINCT ordering_key FROM b WHERE ordering_key IS NOT NULL) k
    CROSS JOIN LATERAL (
        SELECT r.id, r.state FROM {{schema}}.jobs r
        WHERE r.ordering_key = k.ordering_key AND r.state IN ('pending', 'running', 'dead')
        ORDER BY r.id LIMIT 1
    ) h
),
ck AS (
    SELECT k.concurrency_key, k.queue, coalesce(kl.max_running, q.key_max_running) AS lim,
           (SELECT count(*) FROM {{schema}}.jobs r
            WHERE r.state = 'running' AND r.concurrency_key = k.concurrency_key) AS running
    FROM (SELECT DISTINCT concurrency_key, queue FROM b WHERE concurrency_key IS NOT NULL) k
    LEFT JOIN {{schema}}.key_limits kl ON kl.key = k.concurrency_key
    LEFT JOIN {{schema}}.queues q ON q.name = k.queue
),
classified AS (
    SELECT b.queue,
           CASE WHEN o.head_id < b.id AND o.head_state = 'dead' THEN 'dead_head'
                WHEN o.head_id < b.id OR o.any_running THEN 'ordering_behind'
                WHEN c.lim IS NOT NULL AND c.running >= c.lim THEN 'key_limit'
                ELSE 'awaiting_sweep'
           END AS reason
    FROM b
    LEFT JOIN ok o ON o.ordering_key = b.ordering_key
    LEFT JOIN ck c ON c.concurrency_key = b.concurrency_key AND c.queue = b.queue
),
blocked AS (
    SELECT queue,
           count(*) FILTER (WHERE reason = 'key_limit') AS key_limit,
           count(*) FILTER (WHERE reason = 'ordering_behind') AS ordering_behind,
           count(*) FILTER (WHERE reason = 'dead_head') AS dead_head,
           count(*) FILTER (WHERE reason = 'awaiting_sweep') AS awaiting_sweep
    FROM classified GROUP BY queue
),
retrying AS (
    SELECT queue, count(*) AS n
    FROM (SELECT queue FROM {{schema}}.jobs
          WHERE state = 'pending' AND errors <> '[]'::jsonb LIMIT $1 + 1) x
    GROUP BY queue
),
running AS (
    SELECT queue,
           extract(epoch FROM now() - min(attempted_at))::float8 AS oldest_running_age_s
    FROM {{schema}}.jobs WHERE state = 'running' AND isfinite(attempted_at)
    GROUP BY queue
),
names AS (
    SELECT queue FROM blocked UNION SELECT queue FROM retrying UNION SELECT queue FROM running
)
SELECT n.queue,
       coalesce(rt.n, 0) AS retrying,
       ru.oldest_running_age_s,
       coalesce(bl.key_limit, 0) AS key_limit,
       coalesce(bl.ordering_behind, 0) AS ordering_behind,
       coalesce(bl.dead_head, 0) AS dead_head,
       coalesce(bl.awaiting_sweep, 0) AS awaiting_sweep,
       (SELECT count(*) FROM b) AS blocked_read,
       (SELECT coalesce(sum(n), 0) FROM retrying)::bigint AS retrying_read
FROM names n
LEFT JOIN retrying rt ON rt.queue = n.queue
LEFT JOIN running ru ON ru.queue = n.queue
LEFT JOIN blocked bl ON bl.queue = n.queue
ORDER BY n.queue
