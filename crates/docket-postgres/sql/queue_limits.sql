-- queue_limits: replace queue $1's limits.
-- Parameters: $1 text queue, $2 int max_running, $3 int key_max_running, $4 int rate_limit,
--   $5 bigint rate_period_ms (each NULL for none). Run after queue_lock.
-- A new or changed rate starts with a full bucket; an unchanged one keeps its tokens.
INSERT INTO {{schema}}.queues AS q (name, max_running, key_max_running, rate_limit, rate_period_ms,
                                    tokens, refilled_at)
VALUES ($1, $2, $3, $4, $5, coalesce($4, 0), now())
ON CONFLICT (name) DO UPDATE
SET max_running = EXCLUDED.max_running,
    key_max_running = EXCLUDED.key_max_running,
    rate_limit = EXCLUDED.rate_limit,
    rate_period_ms = EXCLUDED.rate_period_ms,
    tokens = CASE WHEN (q.rate_limit, q.rate_period_ms) IS NOT DISTINCT FROM (EXCLUDED.rate_limit, EXCLUDED.rate_period_ms)
                  THEN q.tokens ELSE EXCLUDED.tokens END,
    refilled_at = CASE WHEN (q.rate_limit, q.rate_period_ms) IS NOT DISTINCT FROM (EXCLUDED.rate_limit, EXCLUDED.rate_period_ms)
                       THEN q.refilled_at ELSE now() END,
    updated_at = now()
RETURNING q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
          CASE WHEN q.rate_limit IS NULL THEN NULL
               ELSE {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms) END AS tokens
