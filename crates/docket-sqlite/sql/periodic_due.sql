-- periodic_due: definitions whose next tick is due at ?1, earliest first; paused ones are left
-- alone (their ticks pass; on resume the `missed` policy applies).
-- Parameters: ?1 now (ms), ?2 limit.
SELECT name, cron, timezone, queue, kind, args, priority, max_attempts, missed, next_tick_at,
       last_tick_at, last_job_id, paused_at
FROM periodic
WHERE next_tick_at <= ?1 AND paused_at IS NULL
ORDER BY next_tick_at
LIMIT ?2
