-- sample_buckets_record: add one worker's per-minute histogram counts to the shared rows, and
-- forget minutes older than a day (migration 0025).
-- Parameters: $1 text[] queues, $2 timestamptz[] minutes, $3 "char"[] metrics ('w', 'r'),
--   $4 smallint[] buckets, $5 bigint[] counts; equal lengths, one element per non-empty
--   bucket. Additive (ON CONFLICT adds), so any number of workers report into the same row.
WITH gone AS (
    DELETE FROM {{schema}}.sample_buckets WHERE minute < now() - interval '1 day'
)
INSERT INTO {{schema}}.sample_buckets AS b (queue, minute, metric, bucket, n)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::"char"[], $4::smallint[], $5::bigint[])
ON CONFLICT (queue, minute, metric, bucket) DO UPDATE SET n = b.n + excluded.n
