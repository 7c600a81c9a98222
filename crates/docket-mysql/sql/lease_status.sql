-- lease_status: state and attempt of jobs whose fenced write was refused (to say why).
-- Parameters: the ids (/*ids*/ expanded).
SELECT id, state, attempt FROM jobs WHERE id IN (/*ids*/)
