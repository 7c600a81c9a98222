-- sample_buckets_list: the histogram counts of the minutes samples_list returns.
-- Parameters: ?1 now (ms), ?2 window (ms).
SELECT queue, minute_at, metric, bucket, n
FROM sample_buckets
WHERE minute_at >= ((?1 - ?2) / 60000) * 60000
