-- samples_record: adds one worker's per-minute sample to the queue's row for that minute
-- (samples are additive across workers).
-- Parameters: ?1 queue, ?2 minute (ms), ?3 succeeded, ?4 failed, ?5 wait_ms_sum,
--   ?6 wait_count, ?7 run_ms_sum (all ≥ 0).
INSERT INTO samples (queue, minute_at, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (queue, minute_at) DO UPDATE
SET succeeded = succeeded + excluded.succeeded,
    failed = failed + excluded.failed,
    wait_ms_sum = wait_ms_sum + excluded.wait_ms_sum,
    wait_count = wait_count + excluded.wait_count,
    run_ms_sum = run_ms_sum + excluded.run_ms_sum
