-- queue_pause: mark queue $1 paused (idempotent: the first pause time is kept).
-- Parameters: $1 text queue. Run after queue_lock in the same transaction.
INSERT INTO {{schema}}.queues AS q (name, paused_at) VALUES ($1, now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, now()), updated_at = now()
RETURNING q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
          CASE WHEN q.rate_limit IS NULL THEN NULL
               ELSE {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms) END AS tokens
