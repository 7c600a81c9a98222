-- depth_prev: the previous depth sample of the whole database (queue ''): its minute and
-- high-water mark. No row: never sampled.
SELECT minute_at, hwm FROM queue_depth WHERE queue = '' ORDER BY minute_at DESC LIMIT 1
