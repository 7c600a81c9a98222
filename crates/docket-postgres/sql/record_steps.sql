-- record_steps: record many steps' outputs, each under its claim's fence, through
-- record_steps() (migration 0020).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text[] names, $4 jsonb[] outputs,
-- $5 text owner (arrays of one length, in the caller's order).
-- Returns one row per step that passed its fence: its 1-based position in the input, whether
-- this call wrote it, and its output as recorded (an earlier record of the same name wins).
SELECT ord, written, output FROM {{schema}}.record_steps($1, $2, $3, $4, $5)
