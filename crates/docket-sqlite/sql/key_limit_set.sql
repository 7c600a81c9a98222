-- key_limit_set: sets concurrency key ?1's limits; a new or changed rate starts full.
-- Parameters: ?1 key, ?2 max_running, ?3 rate_limit, ?4 rate_period_ms, ?5 now (ms).
INSERT INTO key_limits (key, max_running, rate_limit, rate_period_ms, tokens, refilled_at, updated_at)
VALUES (?1, ?2, ?3, ?4, coalesce(?3, 0), ?5, ?5)
ON CONFLICT (key) DO UPDATE
SET max_running = excluded.max_running,
    tokens = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                  THEN tokens ELSE excluded.tokens END,
    refilled_at = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                       THEN refilled_at ELSE ?5 END,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = ?5
