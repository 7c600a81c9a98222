-- sample_buckets_forget: drops histogram counts older than a day. Parameters: ?1 now (ms).
DELETE FROM sample_buckets WHERE minute_at < ?1 - 86400000
