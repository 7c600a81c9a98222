-- queue_limits: replaces a queue's limits; a new or changed rate starts with a full bucket.
-- Parameters: ?1 queue, ?2 now (ms), ?3 max_running, ?4 key_max_running, ?5 rate_limit,
--   ?6 rate_period_ms.
-- Assignments run left to right: the bucket is decided before the rate is replaced.
INSERT INTO queues (name, max_running, key_max_running, rate_limit, rate_period_ms, tokens,
                    refilled_at, updated_at)
VALUES (?1, ?3, ?4, ?5, ?6, COALESCE(?5, 0), ?2, ?2)
ON DUPLICATE KEY UPDATE
    tokens = IF(rate_limit <=> VALUES(rate_limit) AND rate_period_ms <=> VALUES(rate_period_ms),
                tokens, VALUES(tokens)),
    refilled_at = IF(rate_limit <=> VALUES(rate_limit) AND rate_period_ms <=> VALUES(rate_period_ms),
                     refilled_at, VALUES(refilled_at)),
    max_running = VALUES(max_running),
    key_max_running = VALUES(key_max_running),
    rate_limit = VALUES(rate_limit),
    rate_period_ms = VALUES(rate_period_ms),
    updated_at = VALUES(updated_at)
