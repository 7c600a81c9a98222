-- queue_control: the control row of queue ? (no row: no controls). Read after the queue lock,
-- so it is the newest committed row.
SELECT paused_at, max_running, key_max_running, rate_limit, rate_period_ms, tokens, refilled_at
FROM queues WHERE name = ?
