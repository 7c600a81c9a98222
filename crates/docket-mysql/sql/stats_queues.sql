-- stats_queues: per-queue counts by state, ages and lease health (a full scan: operators'
-- `docket stats`). Parameters: now (ms) six times, in the order used.
SELECT s.*, (q.paused_at IS NOT NULL) AS paused
FROM (
    SELECT queue,
           COUNT(CASE WHEN state = 'pending' THEN 1 END) AS pending,
           COUNT(CASE WHEN state = 'pending' AND run_at <= ?1 THEN 1 END) AS ready,
           COUNT(CASE WHEN state = 'running' THEN 1 END) AS running,
           COUNT(CASE WHEN state = 'succeeded' THEN 1 END) AS succeeded,
           COUNT(CASE WHEN state = 'dead' THEN 1 END) AS dead,
           COUNT(CASE WHEN state = 'cancelled' THEN 1 END) AS cancelled,
           CAST((?1 - MIN(CASE WHEN state = 'pending' AND run_at <= ?1 THEN run_at END)) / 1000.0
                AS DOUBLE) AS oldest_ready_age_s,
           COUNT(CASE WHEN state = 'running' AND lease_expires_at < ?1 + 10000 THEN 1 END)
               AS running_near_expiry,
           COUNT(CASE WHEN state = 'running' AND lease_expires_at < ?1 THEN 1 END) AS running_expired,
           CAST((?1 - MIN(CASE WHEN state = 'dead' THEN finished_at END)) / 1000.0 AS DOUBLE)
               AS oldest_dead_age_s,
           0 AS blocked
    FROM jobs
    GROUP BY queue
) s
LEFT JOIN queues q ON q.name = s.queue
ORDER BY s.queue
