-- node_row: what the workflow rule reads of a job: its state, queue, name and history.
-- Parameters: ?1 job id.
SELECT state, queue, node, attempt, released, errors, workflow_id FROM jobs WHERE id = ?1
