-- samples_list: the per-queue minute rows of the last $1 milliseconds, oldest first.
-- Parameters: $1 bigint window in milliseconds.
SELECT queue, minute, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum
FROM {{schema}}.samples
WHERE minute >= date_trunc('minute', now() - make_interval(secs => $1 / 1000.0))
ORDER BY minute, queue
