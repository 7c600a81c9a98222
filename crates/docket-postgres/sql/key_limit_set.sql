-- key_limit_set: set the limits of concurrency key $1.
-- Parameters: $1 text key, $2 int max_running, $3 int rate_limit, $4 bigint rate_period_ms.
-- A new or changed rate starts with a full bucket. Takes effect at the next claim that
-- decides the key (claims read the row after taking the key's lock).
INSERT INTO {{schema}}.key_limits AS k (key, max_running, rate_limit, rate_period_ms, tokens, refilled_at)
VALUES ($1, $2, $3, $4, coalesce($3, 0), now())
ON CONFLICT (key) DO UPDATE
SET max_running = EXCLUDED.max_running,
    rate_limit = EXCLUDED.rate_limit,
    rate_period_ms = EXCLUDED.rate_period_ms,
    tokens = CASE WHEN (k.rate_limit, k.rate_period_ms) IS NOT DISTINCT FROM (EXCLUDED.rate_limit, EXCLUDED.rate_period_ms)
                  THEN k.tokens ELSE EXCLUDED.tokens END,
    refilled_at = CASE WHEN (k.rate_limit, k.rate_period_ms) IS NOT DISTINCT FROM (EXCLUDED.rate_limit, EXCLUDED.rate_period_ms)
                       THEN k.refilled_at ELSE now() END,
    updated_at = now()
