-- samples_record: adds one worker's per-minute sample to the queue's row for that minute.
-- Parameters: queue, minute (ms), succeeded, failed, wait_ms_sum, wait_count, run_ms_sum.
INSERT INTO samples (queue, minute_at, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    succeeded = succeeded + VALUES(succeeded),
    failed = failed + VALUES(failed),
    wait_ms_sum = wait_ms_sum + VALUES(wait_ms_sum),
    wait_count = wait_count + VALUES(wait_count),
    run_ms_sum = run_ms_sum + VALUES(run_ms_sum)
