-- periodic_upsert: creates or updates a definition; the schedule restarts at ?10 only when
-- the expression or time zone changed.
-- Parameters: ?1 name, ?2 cron, ?3 timezone, ?4 queue, ?5 kind, ?6 args (JSON text),
--   ?7 priority, ?8 max_attempts, ?9 missed, ?10 next tick (ms), ?11 now (ms).
INSERT INTO periodic (name, cron, timezone, queue, kind, args, priority, max_attempts, missed,
                      next_tick_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT (name) DO UPDATE
SET next_tick_at = CASE WHEN cron = excluded.cron AND timezone = excluded.timezone
                        THEN next_tick_at ELSE excluded.next_tick_at END,
    cron = excluded.cron,
    timezone = excluded.timezone,
    queue = excluded.queue,
    kind = excluded.kind,
    args = excluded.args,
    priority = excluded.priority,
    max_attempts = excluded.max_attempts,
    missed = excluded.missed,
    updated_at = ?11
