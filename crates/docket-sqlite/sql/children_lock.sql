-- children_lock: the waiting children of a batch of parents about to end, in id order, so
-- concurrent batches take shared children in one order (no deadlock). On SQLite, whose
-- writer is alone, a plain read.
-- Parameters: ?1 parent job ids (a list).
SELECT id FROM jobs
WHERE id IN (SELECT child_id FROM job_deps
             WHERE parent_id IN (SELECT value FROM json_each(?1)) AND state = 'waiting')
ORDER BY id
