-- queues_list: every queue with a control row (or only one). Parameters: queue, queue (NULL:
-- all).
SELECT name, paused_at, max_running, key_max_running, rate_limit, rate_period_ms, tokens,
       refilled_at
FROM queues
WHERE ?1 IS NULL OR name = ?1
ORDER BY name
