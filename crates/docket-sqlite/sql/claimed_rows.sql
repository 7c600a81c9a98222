-- claimed_rows: what a worker needs of the jobs this transaction just leased, as one row: a
-- JSON array of objects in the order of ?1 (args and metadata embedded as JSON).
-- Parameters: ?1 JSON array of ids, ?2 owner.
SELECT json_group_array(json_object(
           'id', j.id, 'attempt', j.attempt, 'max_attempts', j.max_attempts, 'queue', j.queue,
           'kind', j.kind, 'args', json(j.args), 'metadata', json(j.metadata),
           'priority', j.priority, 'run_at', j.run_at, 'created_at', j.created_at,
           'lease_expires_at', j.lease_expires_at))
FROM json_each(?1) AS w
JOIN jobs AS j ON j.id = w.value
WHERE j.lease_owner = ?2 AND j.state = 'running'
