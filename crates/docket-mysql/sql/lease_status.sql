-- lease_status: state and attempt of jobs whose fenced write was refused (to say why).
-- Parameters: ?1 the ids (a list: one placeholder each).
SELECT id, state, attempt FROM jobs WHERE id IN (?1)
