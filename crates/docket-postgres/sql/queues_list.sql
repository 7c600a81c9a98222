-- queues_list: every queue with a control row (paused or limited), by name.
-- No parameters.
SELECT q.name, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       CASE WHEN q.rate_limit IS NULL THEN NULL
            ELSE {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms) END AS tokens
FROM {{schema}}.queues q
ORDER BY q.name
