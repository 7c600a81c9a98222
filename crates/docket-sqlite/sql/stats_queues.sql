-- stats_queues: per-queue counts by state, ages and lease health (a full scan: operators'
-- `docket stats`, not the dashboard's bounded overview). Parameters: ?1 now (ms).
SELECT s.*, coalesce(q.paused_at IS NOT NULL, 0) AS paused
FROM (
    SELECT queue,
           sum(state = 'pending') AS pending,
           sum(state = 'pending' AND run_at <= ?1) AS ready,
           sum(state = 'running') AS running,
           sum(state = 'succeeded') AS succeeded,
           sum(state = 'dead') AS dead,
           sum(state = 'cancelled') AS cancelled,
           (?1 - min(CASE WHEN state = 'pending' AND run_at <= ?1 THEN run_at END)) / 1000.0
               AS oldest_ready_age_s,
           sum(state = 'running' AND lease_expires_at < ?1 + 10000) AS running_near_expiry,
           sum(state = 'running' AND lease_expires_at < ?1) AS running_expired,
           (?1 - min(CASE WHEN state = 'dead' THEN finished_at END)) / 1000.0 AS oldest_dead_age_s,
           0 AS blocked
    FROM jobs
    GROUP BY queue
) s
LEFT JOIN queues q ON q.name = s.queue
ORDER BY s.queue
