-- workflow_node: makes a job just inserted (enqueue_insert.sql, in the same transaction) a
-- node of its workflow: waiting while it has parents.
-- Parameters: ?1 workflow id, ?2 node name, ?3 parents (edges into it), ?4 the job's id.
-- The CASE reads only arguments, so the order of the assignments does not matter (MariaDB
-- assigns left to right, seeing earlier assignments).
UPDATE jobs
SET workflow_id = ?1, node = ?2, deps_waiting = ?3,
    state = CASE WHEN ?3 > 0 THEN 'waiting' ELSE state END
WHERE id = ?4
