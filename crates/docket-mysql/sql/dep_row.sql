-- dep_row: the edge from ?1 to ?2 and its state, locked (on SQLite, a plain read).
-- Parameters: ?1 parent job id, ?2 child job id.
SELECT state FROM job_deps WHERE parent_id = ?1 AND child_id = ?2
FOR UPDATE
