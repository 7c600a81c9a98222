-- complete_outputs: mark claimed jobs succeeded with their outputs, through
-- complete_output_fenced() (migration 0018).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 jsonb[] outputs (parallel to ids),
--   $4 text owner.
-- Invariants: complete_many.sql's fence (id + attempt + owner + unexpired lease, judged when
-- written); rows that do not match keep no output and are reported as LeaseLost. Each job
-- completed is announced on {{schema}}_done at commit. Callers pass ids sorted.
SELECT id, attempt FROM {{schema}}.complete_output_fenced($1, $2, $3, $4)
