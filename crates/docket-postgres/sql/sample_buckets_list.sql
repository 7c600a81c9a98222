-- sample_buckets_list: the histogram counts of the minutes samples_list returns (the last $1
-- milliseconds). Parameters: $1 bigint window in milliseconds.
SELECT queue, minute, metric::text AS metric, bucket, n
FROM {{schema}}.sample_buckets
WHERE minute >= date_trunc('minute', now() - make_interval(secs => $1 / 1000.0))
