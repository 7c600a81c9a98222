-- claimed_rows: what a worker needs of the jobs this transaction just leased, as one row: a
-- JSON array with one array per job, by position (rows::claimed_all decodes them):
--   [id, attempt, max_attempts, queue, kind, args, metadata, priority, run_at, created_at,
--    lease_expires_at, released]
-- args and metadata are embedded as JSON. Arrays, not objects: no key is built here or
-- matched there (the claim's decoding was a fifth of a drain's instructions with objects
-- parsed into serde_json::Value maps).
-- Parameters: ?1 JSON array of ids, ?2 owner.
SELECT json_group_array(json_array(
           j.id, j.attempt, j.max_attempts, j.queue, j.kind, json(j.args), json(j.metadata),
           j.priority, j.run_at, j.created_at, j.lease_expires_at, j.released))
FROM json_each(?1) AS w
JOIN jobs AS j ON j.id = w.value
WHERE j.lease_owner = ?2 AND j.state = 'running'
