-- workflow_kind: whether workflow ?1 exists (a batch's refusal names a graph's id as such).
-- Parameters: ?1 workflow id.
SELECT id FROM workflows WHERE id = ?1
