-- periodic_due: definitions due at now, earliest first; paused ones are left alone (their
-- ticks pass; on resume the `missed` policy applies). Parameters: now (ms), limit.
SELECT name, cron, timezone, queue, kind, args, priority, max_attempts, missed, next_tick_at,
       last_tick_at, last_job_id, paused_at
FROM periodic
WHERE next_tick_at <= ? AND paused_at IS NULL
ORDER BY next_tick_at
LIMIT ?
