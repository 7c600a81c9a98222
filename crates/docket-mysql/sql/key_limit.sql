-- key_limit: the limits row of concurrency key ?.
SELECT max_running, rate_limit, rate_period_ms, tokens, refilled_at FROM key_limits WHERE ckey = ?
