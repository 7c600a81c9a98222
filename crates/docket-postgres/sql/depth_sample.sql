-- depth_sample: the leader's sample of this minute — per queue, the waiting jobs (due, not
-- started, blocked or not), the running ones, and the jobs enqueued since the previous
-- sample; plus the row for the whole database (queue ''), which carries the high-water mark.
-- Parameters: $1 bigint cap: a waiting count reads at most cap + 1 rows (as the overview's).
-- Enqueued: jobs with an id above the previous sample's mark (the highest id then) and at
-- most the highest id now, counted by queue from the primary key: work in proportion to what
-- was enqueued in the minute. A job already deleted (completed with delete) or committed
-- after the sample with a lower id is not counted; NULL when the previous sample is more than
-- two minutes old (the count would cover the gap, not a minute).
-- Queues: loose scans of jobs_claim_idx and jobs_blocked_idx (one probe per queue), the
-- running ones and those with fresh jobs.
-- Idempotent within a minute (the first sample stands); rows older than two days go.
WITH RECURSIVE prev AS (
    SELECT minute, hwm FROM {{schema}}.queue_depth WHERE queue = ''
    ORDER BY minute DESC LIMIT 1
),
top AS (SELECT coalesce(max(id), 0) AS hwm FROM {{schema}}.jobs),
counted AS (
    SELECT (SELECT minute FROM prev) >= date_trunc('minute', now()) - interval '2 minutes' AS ok
),
fresh AS (
    SELECT j.queue, count(*) AS n
    FROM {{schema}}.jobs j
    WHERE (SELECT ok FROM counted)
      AND j.id > (SELECT hwm FROM prev) AND j.id <= (SELECT hwm FROM top)
    GROUP BY j.queue
),
pq(queue) AS (
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
running AS (
    SELECT queue, count(*) AS n FROM {{schema}}.jobs WHERE state = 'running' GROUP BY queue
),
names AS (
    SELECT queue FROM pq WHERE queue IS NOT NULL
    UNION SELECT queue FROM bq WHERE queue IS NOT NULL
    UNION SELECT queue FROM running
    UNION SELECT queue FROM fresh
),
per_queue AS (
    SELECT n.queue,
           (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
             WHERE j.queue = n.queue AND j.state = 'pending' AND NOT j.blocked
               AND j.run_at <= now() LIMIT $1 + 1) x)
         + (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.jobs j
             WHERE j.queue = n.queue AND j.state = 'pending' AND j.blocked
               AND j.run_at <= now() LIMIT $1 + 1) x) AS waiting,
           coalesce(r.n, 0) AS running,
           CASE WHEN (SELECT ok FROM counted) THEN coalesce(f.n, 0) END AS enqueued
    FROM names n
    LEFT JOIN running r ON r.queue = n.queue
    LEFT JOIN fresh f ON f.queue = n.queue
),
pruned AS (
    DELETE FROM {{schema}}.queue_depth WHERE minute < now() - interval '2 days'
)
INSERT INTO {{schema}}.queue_depth (minute, queue, waiting, running, enqueued, hwm)
SELECT date_trunc('minute', now()), p.queue, p.waiting, p.running, p.enqueued,
       (SELECT hwm FROM top)
FROM per_queue p
UNION ALL
SELECT date_trunc('minute', now()), '',
       coalesce((SELECT sum(waiting) FROM per_queue), 0),
       coalesce((SELECT sum(running) FROM per_queue), 0),
       CASE WHEN (SELECT ok FROM counted) THEN coalesce((SELECT sum(n) FROM fresh), 0) END,
       (SELECT hwm FROM top)
ON CONFLICT (minute, queue) DO NOTHING
