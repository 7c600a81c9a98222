-- enqueue_workflow: a whole graph of jobs in one call, through enqueue_workflow() (migration
-- 0030), which checks the graph (names, references, self-edges, cycles, sizes) and writes
-- the workflow, its jobs and its edges — all or nothing.
-- Parameters: $1 jsonb graph ({"name": …, "nodes": [{"name", "queue", "kind", "args",
--   "after": […]}, …]}).
-- Returns one row per node in the graph's order: workflow_id, node, job_id.
SELECT workflow_id, node, job_id FROM {{schema}}.enqueue_workflow($1)
