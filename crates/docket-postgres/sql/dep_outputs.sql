-- dep_outputs: a job's parents in its workflow, with their states and outputs.
-- Parameters: $1 bigint child id.
-- Reads job_deps by child (job_deps_child_idx) and each parent by its key.
SELECT p.node, p.id, p.state, p.output
FROM {{schema}}.job_deps AS d
JOIN {{schema}}.jobs AS p ON p.id = d.parent_id
WHERE d.child_id = $1
ORDER BY p.node
