-- periodic_upsert: creates or updates a definition; the schedule restarts only when the
-- expression or time zone changed (decided before they are replaced: left-to-right).
-- Parameters: name, cron, timezone, queue, kind, args (JSON), priority, max_attempts,
--   missed, next tick (ms), now (ms).
INSERT INTO periodic (name, cron, timezone, queue, kind, args, priority, max_attempts, missed,
                      next_tick_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    next_tick_at = IF(cron = VALUES(cron) AND timezone = VALUES(timezone),
                      next_tick_at, VALUES(next_tick_at)),
    cron = VALUES(cron),
    timezone = VALUES(timezone),
    queue = VALUES(queue),
    kind = VALUES(kind),
    args = VALUES(args),
    priority = VALUES(priority),
    max_attempts = VALUES(max_attempts),
    missed = VALUES(missed),
    updated_at = VALUES(updated_at)
