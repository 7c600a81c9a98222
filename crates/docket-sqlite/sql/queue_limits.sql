-- queue_limits: replaces queue ?1's limits; a new or changed rate starts with a full bucket.
-- Parameters: ?1 queue, ?2 now (ms), ?3 max_running, ?4 key_max_running, ?5 rate_limit,
--   ?6 rate_period_ms.
INSERT INTO queues (name, max_running, key_max_running, rate_limit, rate_period_ms, tokens,
                    refilled_at, updated_at)
VALUES (?1, ?3, ?4, ?5, ?6, coalesce(?5, 0), ?2, ?2)
ON CONFLICT (name) DO UPDATE
SET max_running = excluded.max_running,
    key_max_running = excluded.key_max_running,
    tokens = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                  THEN tokens ELSE excluded.tokens END,
    refilled_at = CASE WHEN rate_limit IS excluded.rate_limit AND rate_period_ms IS excluded.rate_period_ms
                       THEN refilled_at ELSE ?2 END,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = ?2
