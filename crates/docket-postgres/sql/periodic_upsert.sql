-- periodic_upsert: create or update periodic definition $1.
-- Parameters: $1 name, $2 cron, $3 timezone, $4 queue, $5 kind, $6 args jsonb,
--   $7 smallint priority, $8 int max_attempts, $9 text missed policy,
--   $10 timestamptz next tick after now (computed from db_now).
-- The schedule restarts at $10 only when the expression or zone changed; otherwise the
-- stored next tick stays, so ticks missed during a redeploy follow the missed policy.
INSERT INTO {{schema}}.periodic AS p (name, cron, timezone, queue, kind, args, priority, max_attempts,
                                      missed, next_tick_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron,
    timezone = EXCLUDED.timezone,
    queue = EXCLUDED.queue,
    kind = EXCLUDED.kind,
    args = EXCLUDED.args,
    priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts,
    missed = EXCLUDED.missed,
    next_tick_at = CASE WHEN (p.cron, p.timezone) = (EXCLUDED.cron, EXCLUDED.timezone)
                        THEN p.next_tick_at ELSE EXCLUDED.next_tick_at END,
    updated_at = now()
RETURNING p.*
