-- samples_list: samples of the minutes from (now - window), truncated to the minute, on.
-- Parameters: ?1 now (ms), ?2 window (ms).
SELECT queue, minute_at, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum
FROM samples
WHERE minute_at >= ((?1 - ?2) / 60000) * 60000
ORDER BY minute_at, queue
