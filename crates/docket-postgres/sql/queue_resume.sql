-- queue_resume: clear queue $1's pause. No row means nothing was paused (no row returned).
-- Parameters: $1 text queue. Run after queue_lock in the same transaction.
UPDATE {{schema}}.queues AS q SET paused_at = NULL, updated_at = now()
WHERE q.name = $1
RETURNING q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
          CASE WHEN q.rate_limit IS NULL THEN NULL
               ELSE {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms) END AS tokens
