-- workflows_list: the newest ?1 graphs (batches are listed by batch_list) with their nodes
-- counted by state, newest first.
-- Parameters: ?1 bigint limit (1..=1000, checked by the caller).
-- One row per (workflow, state of some node); a workflow whose nodes were all pruned has one
-- row with a NULL state. Counts by jobs_workflow_idx.
SELECT w.id, w.name, w.created_at, w.nodes AS nodes, j.state, count(j.id) AS n
FROM (SELECT * FROM workflows WHERE callbacks IS NULL ORDER BY id DESC LIMIT ?1) AS w
LEFT JOIN jobs AS j ON j.workflow_id = w.id
GROUP BY w.id, w.name, w.created_at, w.nodes, j.state
ORDER BY w.id DESC, j.state
