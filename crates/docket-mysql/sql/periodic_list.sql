-- periodic_list: every definition (or one), by name. Parameters: name, name (NULL: all).
SELECT name, cron, timezone, queue, kind, args, priority, max_attempts, missed, next_tick_at,
       last_tick_at, last_job_id, paused_at
FROM periodic
WHERE ?1 IS NULL OR name = ?1
ORDER BY name
