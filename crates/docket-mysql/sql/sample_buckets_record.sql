-- sample_buckets_record: adds one histogram count to the queue's row for that minute, metric
-- and bucket (additive across workers). Parameters: ?1 queue, ?2 minute (ms), ?3 metric
-- ('w' wait, 'r' run), ?4 bucket, ?5 count (> 0).
INSERT INTO sample_buckets (queue, minute_at, metric, bucket, n)
VALUES (?1, ?2, ?3, ?4, ?5)
ON DUPLICATE KEY UPDATE n = n + VALUES(n)
