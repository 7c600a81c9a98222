-- lease_status: the state and attempt of jobs whose fenced write was refused (to say why).
-- Parameters: ?1 JSON array of ids.
SELECT id, state, attempt FROM jobs WHERE id IN (SELECT value FROM json_each(?1))
