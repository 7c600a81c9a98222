-- deps_of_parent: the edges of an ended parent not yet consumed, in child order (so every
-- transaction that ends parents takes shared children in one order).
-- Parameters: ?1 parent job id.
SELECT child_id, on_failure FROM job_deps WHERE parent_id = ?1 AND state = 'waiting'
ORDER BY child_id
