-- job_state: what an operator action on job ? decides from, locked for the action.
SELECT state, attempt, released, queue, unique_key, cancel_requested_at, errors, run_at, batch_id
FROM jobs WHERE id = ? FOR UPDATE
