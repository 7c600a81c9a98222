-- periodic_due: definitions due at now, earliest first. Parameters: now (ms), limit.
SELECT name, cron, timezone, queue, kind, args, priority, max_attempts, missed, next_tick_at,
       last_tick_at, last_job_id
FROM periodic
WHERE next_tick_at <= ?
ORDER BY next_tick_at
LIMIT ?
