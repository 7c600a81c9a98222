-- key_limit: the limits row of concurrency key ?1 (no row: the queue's key_max_running).
-- Parameters: ?1 key.
SELECT max_running, rate_limit, rate_period_ms, tokens, refilled_at FROM key_limits WHERE key = ?1
