-- queue_lock_share: the claim's shared lock on queue ?'s row (claims of an unlimited queue
-- share it; pause and limit changes take it exclusively, so they wait for claims in flight
-- and bind every later one). No row yet: the caller creates it (queue_lock_ensure.sql).
SELECT 1 FROM queue_locks WHERE name = ? LOCK IN SHARE MODE
