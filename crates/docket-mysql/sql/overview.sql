-- overview: every known queue (pending, running or dead jobs, a control row, a live worker)
-- at a glance. The counts are exact index range counts (these servers cannot cap a count in
-- a correlated subquery); the caller caps what it shows.
-- Parameters: ?1 now (ms). ?2 (the count cap) is not used here.
WITH names AS (
    SELECT DISTINCT queue FROM jobs WHERE state IN ('pending', 'running', 'dead')
    UNION SELECT name FROM queues
    UNION SELECT t.q FROM workers w,
          JSON_TABLE(w.queues, '$[*]' COLUMNS (q VARCHAR(64) PATH '$')) t
          WHERE w.expires_at > ?1
)
SELECT n.queue,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'pending') AS pending,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'pending'
          AND j.run_at <= ?1) AS ready,
       0 AS blocked,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'dead') AS dead,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running') AS running,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running'
          AND j.lease_expires_at < ?1 + 10000) AS near_expiry,
       (SELECT COUNT(*) FROM workers w
         WHERE w.expires_at > ?1 AND JSON_CONTAINS(w.queues, JSON_QUOTE(n.queue))) AS workers,
       (SELECT CAST((?1 - MIN(j.run_at)) / 1000.0 AS DOUBLE) FROM jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND j.run_at <= ?1) AS oldest_ready_age_s,
       q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       q.tokens, q.refilled_at
FROM names n
LEFT JOIN queues q ON q.name = n.queue
ORDER BY n.queue
