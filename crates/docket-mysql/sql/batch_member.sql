-- batch_member: makes a job just inserted (enqueue_insert.sql, same transaction) member ?2
-- of batch ?1: a node of its workflow with no parents.
-- Parameters: ?1 batch id, ?2 node name (#1, #2, …), ?3 the job's id.
UPDATE jobs SET workflow_id = ?1, node = ?2, deps_waiting = 0, batch_id = ?1 WHERE id = ?3
