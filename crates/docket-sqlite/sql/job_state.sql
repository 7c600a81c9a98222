-- job_state: what an operator action on job ?1 decides from (state, budget, keys, history).
-- Parameters: ?1 id.
SELECT state, attempt, released, queue, unique_key, cancel_requested_at, errors, run_at, batch_id FROM jobs WHERE id = ?1
