-- overview: every known queue at a glance, from bounded reads only, so a dashboard can run it
-- every second on a table of millions (no count(*) over the table).
-- Parameters: $1 bigint cap: a count reads at most cap + 1 rows (the caller shows "cap+").
-- Known queues: those with pending jobs (a loose index scan of jobs_claim_idx: one probe per
-- queue, not one row per job), running ones, blocked and dead ones (loose scans of
-- jobs_blocked_idx and jobs_dead_idx), those with a control row, and those a live worker
-- serves.
-- The oldest waiting job is the oldest due one, held by a key or not: the older of the
-- oldest ready one (jobs_age_idx) and the oldest blocked one (jobs_blocked_idx, by run_at).
-- Ages skip non-finite times (only a write that bypassed the table's checks stores one).
WITH RECURSIVE pq(queue) AS (
    (SELECT queue FROM {{schema}}.jobs
     WHERE state = 'pending' AND NOT blocked ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{schema}}.jobs j
            WHERE j.state = 'pending' AND NOT j.blocked AND j.queue > pq.queue
            ORDER BY j.queue LIMIT 1)
    FROM pq WHERE pq.queue IS NOT NULL
),
bq(queue) AS (
    (SELECT queue FROM {{schema}}.jobs
     WHERE state = 'pending' AND blocked ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{schema}}.jobs j
            WHERE j.state = 'pending' AND j.blocked AND j.queue > bq.queue
            ORDER BY j.queue LIMIT 1)
    FROM bq WHERE bq.queue IS NOT NULL
),
dq(queue) AS (
    (SELECT queue FROM {{schema}}.jobs WHERE state = 'dead' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{schema}}.jobs j
            WHERE j.state = 'dead' AND j.queue > dq.queue
            ORDER BY j.queue LIMIT 1)
    FROM dq WHERE dq.queue IS NOT NULL
),
running AS (
    SELECT queue, count(*) AS n,
           count(*) FILTER (WHERE lease_expires_at < now() + interval '10 seconds') AS near
    FROM {{schema}}.jobs WHERE state = 'running' GROUP BY queue
),
live AS (
    SELECT q AS queue, count(*) AS n
    FROM {{schema}}.workers, unnest(queues) AS q
    WHERE expires_at > now() GROUP BY q
),
names AS (
    SELECT queue FROM pq WHERE queue IS NOT NULL
    UNION SELECT queue FROM bq WHERE queue IS NOT NULL
    UNION SELECT queue FROM running
    UNION SELECT name FROM {{schema}}.queues
    UNION SELECT queue FROM live
    UNION SELECT queue FROM dq WHERE queue IS NOT NULL
)
SELECT n.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND NOT j.blocked LIMIT $1 + 1) x) AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND NOT j.blocked AND j.run_at <= now()
         LIMIT $1 + 1) x) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND j.blocked LIMIT $1 + 1) x) AS blocked,
       (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
         WHERE j.queue = n.queue AND j.state = 'dead' LIMIT $1 + 1) x) AS dead,
       coalesce(r.n, 0) AS running,
       coalesce(r.near, 0) AS near_expiry,
       coalesce(l.n, 0) AS workers,
       (SELECT extract(epoch FROM now() - min(j.run_at))::float8 FROM {{schema}}.jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND NOT j.blocked
           AND j.run_at <= now() AND isfinite(j.run_at)) AS oldest_ready_age_s,
       (SELECT extract(epoch FROM now() - least(
                 (SELECT min(j.run_at) FROM {{schema}}.jobs j
                   WHERE j.queue = n.queue AND j.state = 'pending' AND NOT j.blocked
                     AND j.run_at <= now() AND isfinite(j.run_at)),
                 (SELECT min(j.run_at) FROM {{schema}}.jobs j
                   WHERE j.queue = n.queue AND j.state = 'pending' AND j.blocked
                     AND j.run_at <= now() AND isfinite(j.run_at))))::float8) AS oldest_waiting_age_s,
       q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       CASE WHEN q.rate_limit IS NULL THEN NULL
            ELSE {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms)
       END AS tokens,
       now() AS at
FROM names n
LEFT JOIN running r ON r.queue = n.queue
LEFT JOIN live l ON l.queue = n.queue
LEFT JOIN {{schema}}.queues q ON q.name = n.queue
ORDER BY n.queue
