-- unblock_keys: the safety net for blocked jobs (see migration 0005): unflag jobs whose key
-- could run now, at most $1 keys of each kind. Returns how many jobs were unflagged.
-- Parameters: $1 int batch.
SELECT {{schema}}.unblock_keys($1)::bigint
