-- depth_prune: deletes depth samples older than two days. Parameters: ?1 now (ms).
DELETE FROM queue_depth WHERE minute_at < ?1 - 172800000
