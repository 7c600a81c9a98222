-- spawn_nodes: a running workflow node adds a graph to its workflow, through spawn_nodes()
-- (migration 0030): fenced by its claim, once per step name.
-- Parameters: $1 bigint job id, $2 int attempt, $3 text owner, $4 text step name (the user's
--   part; the function records 'docket:spawn:' || it), $5 jsonb graph.
-- Returns one row per spawned node (workflow_id, node, job_id); none when the claim no longer
-- holds.
SELECT workflow_id, node, job_id FROM {{schema}}.spawn_nodes($1, $2, $3, $4, $5)
