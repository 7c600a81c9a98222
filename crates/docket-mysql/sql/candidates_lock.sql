-- candidates_lock: locks those of the given jobs that are still ready and that no other claim
-- holds (SKIP LOCKED), through the primary key only, so no secondary-index entry of a job
-- this claim does not take is locked (see candidates_starving.sql). The state and the time
-- are read again under the lock: a job another claim leased since the plain read is left.
-- No ORDER BY / LIMIT here: a sorted locking read locks every match before it cuts; the
-- caller keeps the plain read's order.
-- Parameters: ?1 queue, ?2 the instant (ms), ?3 the ids (a list: one placeholder each).
SELECT id, ordering_key, concurrency_key
FROM jobs FORCE INDEX (PRIMARY)
WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2 AND id IN (?3)
FOR UPDATE SKIP LOCKED
