-- key_limit_set: sets a concurrency key's limits; a new or changed rate starts full.
-- Parameters: ?1 key, ?2 max_running, ?3 rate_limit, ?4 rate_period_ms, ?5 now (ms).
INSERT INTO key_limits (ckey, max_running, rate_limit, rate_period_ms, tokens, refilled_at, updated_at)
VALUES (?1, ?2, ?3, ?4, COALESCE(?3, 0), ?5, ?5)
ON DUPLICATE KEY UPDATE
    tokens = IF(rate_limit <=> VALUES(rate_limit) AND rate_period_ms <=> VALUES(rate_period_ms),
                tokens, VALUES(tokens)),
    refilled_at = IF(rate_limit <=> VALUES(rate_limit) AND rate_period_ms <=> VALUES(rate_period_ms),
                     refilled_at, VALUES(refilled_at)),
    max_running = VALUES(max_running),
    rate_limit = VALUES(rate_limit),
    rate_period_ms = VALUES(rate_period_ms),
    updated_at = VALUES(updated_at)
