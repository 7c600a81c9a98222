-- outbox_mark: acknowledged publishes marked through outbox_mark() (migration 0032), fenced
-- on each message's attempt.
-- Parameters: $1 bigint[] ids, $2 integer[] attempts, $3 bigint[] stream sequences,
--   $4 boolean[] duplicates (parallel arrays).
-- Returns one row: marked (how many were marked).
SELECT {{schema}}.outbox_mark($1, $2, $3, $4) AS marked
