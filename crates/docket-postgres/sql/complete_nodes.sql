-- complete_nodes: complete claimed workflow nodes, each with its output or none, through
-- complete_nodes_fenced() (migration 0030).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 jsonb[] outputs (NULL for none; parallel
--   to ids), $4 text owner.
-- Invariants: complete_many.sql's fence (id + attempt + owner + unexpired lease, judged when
-- written); a row that does not match changes nothing, so a stale attempt consumes no edge.
-- The function locks the batch's waiting children in id order first; the trigger
-- jobs_workflow_ended consumes each ended node's edges in the same transaction. Callers pass
-- ids sorted.
SELECT id, attempt FROM {{schema}}.complete_nodes_fenced($1, $2, $3, $4)
