-- queue_limits: replaces queue ?1's limits; a new or changed rate starts with a full bucket.
-- Parameters: ?1 queue, ?2 max_running, ?3 key_max_running, ?4 rate_limit,
--   ?5 rate_period_ms, ?6 now (ms).
INSERT INTO queues (name, max_running, key_max_running, rate_limit, rate_period_ms, tokens,
                    refilled_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, coalesce(?4, 0), ?6, ?6)
ON CONFLICT (name) DO UPDATE
SET max_running = excluded.max_running,
    key_max_running = excluded.key_max_running,
    tokens = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                  THEN tokens ELSE excluded.tokens END,
    refilled_at = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                       THEN refilled_at ELSE ?6 END,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = ?6
