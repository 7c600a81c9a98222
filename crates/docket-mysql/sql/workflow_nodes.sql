-- workflow_nodes: one workflow's row and its nodes, in enqueue order.
-- Parameters: ?1 bigint workflow id.
-- One row per node (node columns NULL when none is left), by jobs_workflow_idx.
SELECT w.id AS workflow_id, w.name, w.created_at, w.nodes AS nodes,
       j.id, j.node, j.state, j.kind
FROM workflows AS w
LEFT JOIN jobs AS j ON j.workflow_id = w.id
WHERE w.id = ?1
ORDER BY j.id
