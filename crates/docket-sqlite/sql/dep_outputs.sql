-- dep_outputs: a job's parents in its workflow, with their states and outputs.
-- Parameters: ?1 child job id.
SELECT p.node, p.id, p.state, p.output
FROM job_deps AS d JOIN jobs AS p ON p.id = d.parent_id
WHERE d.child_id = ?1
ORDER BY p.node
