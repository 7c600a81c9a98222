-- key_limits_list: every concurrency key with limits, by key.
-- No parameters.
SELECT key, max_running, rate_limit, rate_period_ms
FROM {{schema}}.key_limits
ORDER BY key
