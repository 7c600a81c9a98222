-- outbox_fail: a failed publish recorded through outbox_fail() (migration 0032), fenced.
-- Parameters: $1 bigint id, $2 integer attempt, $3 text error, $4 bigint retry delay (ms).
-- Returns one row: applied (false when another claim owns the message or it was published).
SELECT {{schema}}.outbox_fail($1, $2, $3, $4) AS applied
