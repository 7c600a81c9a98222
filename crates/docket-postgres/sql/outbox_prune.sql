-- outbox_prune: published messages older than the retention deleted through prune_outbox()
-- (migration 0032), oldest first, at most $2.
-- Parameters: $1 bigint retention (ms), $2 integer limit.
-- Returns one row: pruned.
SELECT {{schema}}.prune_outbox($1, $2) AS pruned
