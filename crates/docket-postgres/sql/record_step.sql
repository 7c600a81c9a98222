-- record_step: record one step's output under the claim's fence, through record_step()
-- (migration 0019).
-- Parameters: $1 bigint id, $2 int attempt, $3 text owner, $4 text name, $5 jsonb output.
-- Returns no row when the fence refused (the caller reports LeaseLost); otherwise whether
-- this call wrote the step, and the step's output as recorded (an earlier record of the same
-- name wins).
SELECT written, output FROM {{schema}}.record_step($1, $2, $3, $4, $5)
