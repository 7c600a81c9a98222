-- periodic_due: definitions with a tick due now (database clock), earliest first, and now().
-- Parameters: $1 bigint limit.
SELECT p.*, now() AS db_now
FROM {{schema}}.periodic p
WHERE p.next_tick_at <= now()
ORDER BY p.next_tick_at
LIMIT $1
