-- depth_insert: one queue's depth sample for a minute; the first sample of a minute stands.
-- Parameters: ?1 minute (ms), ?2 queue ('' for the whole database), ?3 waiting, ?4 running,
--   ?5 enqueued (NULL: unknown after a gap), ?6 high-water mark.
INSERT IGNORE INTO queue_depth (minute_at, queue, waiting, running, enqueued, hwm)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
