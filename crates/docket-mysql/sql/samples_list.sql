-- samples_list: samples from the minute of (now - window) on. Parameters: the first minute
-- (ms, computed by the caller from the server's now).
SELECT queue, minute_at, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum
FROM samples
WHERE minute_at >= ?3
ORDER BY minute_at, queue
