-- key_limits_list: every key with limits.
SELECT ckey AS `key`, max_running, rate_limit, rate_period_ms FROM key_limits ORDER BY ckey
