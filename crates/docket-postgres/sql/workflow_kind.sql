-- workflow_kind: whether workflow $1 exists and is a batch (a batch's refusal names which).
-- Parameters: $1 bigint workflow id.
SELECT callbacks IS NOT NULL AS batch FROM {{schema}}.workflows WHERE id = $1
