-- workflow_edges: one workflow's edges.
-- Parameters: ?1 bigint workflow id.
SELECT parent_id, child_id, on_failure, state
FROM job_deps
WHERE workflow_id = ?1
ORDER BY parent_id, child_id
