-- queue_control: the control row of queue ?1 (no row: no controls).
-- Parameters: ?1 queue. Read inside the claim's write transaction, so it binds that claim.
SELECT paused_at, max_running, key_max_running, rate_limit, rate_period_ms, tokens, refilled_at
FROM queues WHERE name = ?1
