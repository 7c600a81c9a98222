-- overview: every known queue (with pending, running or dead jobs, a control row, or a live
-- worker) at a glance; the job counts stop at ?2 + 1 so the caller can say "more".
-- Parameters: ?1 now (ms), ?2 the count cap.
WITH names(queue) AS (
    SELECT DISTINCT queue FROM jobs WHERE state = 'pending'
    UNION SELECT DISTINCT queue FROM jobs WHERE state = 'running'
    UNION SELECT DISTINCT queue FROM jobs WHERE state = 'dead'
    UNION SELECT name FROM queues
    UNION SELECT q.value FROM workers w, json_each(w.queues) q WHERE w.expires_at > ?1
)
SELECT n.queue,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' LIMIT ?2 + 1)) AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND j.run_at <= ?1 LIMIT ?2 + 1)) AS ready,
       0 AS blocked,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j
         WHERE j.queue = n.queue AND j.state = 'dead' LIMIT ?2 + 1)) AS dead,
       (SELECT count(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running') AS running,
       (SELECT count(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running'
          AND j.lease_expires_at < ?1 + 10000) AS near_expiry,
       (SELECT count(*) FROM workers w, json_each(w.queues) q
         WHERE w.expires_at > ?1 AND q.value = n.queue) AS workers,
       -- The oldest ready job: the oldest of each priority the queue has (one seek each in
       -- jobs_claim_idx), not a scan of every pending job.
       (SELECT (?1 - min(m)) / 1000.0 FROM (
          WITH RECURSIVE pr(p) AS (
              SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
                      WHERE state = 'pending' AND queue = n.queue)
              UNION ALL
              SELECT (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
                      WHERE state = 'pending' AND queue = n.queue AND priority > pr.p)
              FROM pr WHERE pr.p IS NOT NULL)
          SELECT (SELECT min(run_at) FROM jobs INDEXED BY jobs_claim_idx
                  WHERE state = 'pending' AND queue = n.queue AND priority = pr.p) AS m
          FROM pr WHERE pr.p IS NOT NULL)
        WHERE m <= ?1) AS oldest_ready_age_s,
       q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       q.tokens, q.refilled_at
FROM names n
LEFT JOIN queues q ON q.name = n.queue
ORDER BY n.queue
