-- samples_record: add one worker's per-minute work to the shared per-queue minute rows, and
-- forget minutes older than a day.
-- Parameters: $1 text[] queues, $2 timestamptz[] minutes (truncated by the caller),
--   $3 bigint[] succeeded, $4 bigint[] failed, $5 bigint[] wait ms sums, $6 bigint[] wait
--   counts, $7 bigint[] run ms sums; equal lengths.
-- Additive (ON CONFLICT adds), so any number of workers report into the same row.
WITH gone AS (
    DELETE FROM {{schema}}.samples WHERE minute < now() - interval '1 day'
)
INSERT INTO {{schema}}.samples AS s
    (queue, minute, succeeded, failed, wait_ms_sum, wait_count, run_ms_sum)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[],
                     $6::bigint[], $7::bigint[])
ON CONFLICT (queue, minute) DO UPDATE
SET succeeded = s.succeeded + excluded.succeeded,
    failed = s.failed + excluded.failed,
    wait_ms_sum = s.wait_ms_sum + excluded.wait_ms_sum,
    wait_count = s.wait_count + excluded.wait_count,
    run_ms_sum = s.run_ms_sum + excluded.run_ms_sum
