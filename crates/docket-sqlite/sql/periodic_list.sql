-- periodic_list: every definition (or only ?1 when not NULL), by name.
-- Parameters: ?1 name or NULL.
SELECT name, cron, timezone, queue, kind, args, priority, max_attempts, missed, next_tick_at,
       last_tick_at, last_job_id, paused_at
FROM periodic
WHERE ?1 IS NULL OR name = ?1
ORDER BY name
