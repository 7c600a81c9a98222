-- workflow_grow: a workflow gained ?2 spawned nodes.
-- Parameters: ?1 workflow id, ?2 how many.
UPDATE workflows SET nodes = nodes + ?2 WHERE id = ?1
