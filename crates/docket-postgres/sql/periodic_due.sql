-- periodic_due: definitions with a tick due now (database clock), earliest first, and now();
-- a paused one is left alone (its ticks pass; on resume its `missed` policy applies).
-- Parameters: $1 bigint limit.
SELECT p.*, now() AS db_now
FROM {{schema}}.periodic p
WHERE p.next_tick_at <= now() AND p.paused_at IS NULL
ORDER BY p.next_tick_at
LIMIT $1
