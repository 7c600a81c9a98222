-- skip: an operator gives up on dead job $1: it becomes cancelled (history kept, with an
-- entry saying so), which releases its ordering key (trigger jobs_release_keys).
-- Parameters: $1 bigint id. Returns the id, or no row when the job is not dead.
UPDATE {{schema}}.jobs
SET state = 'cancelled',
    finished_at = now(),
    errors = {{schema}}.push_error(errors, jsonb_build_object(
        'attempt', attempt - released, 'at', now(), 'class', 'skipped', 'message', 'skipped by an operator'))
WHERE id = $1 AND state = 'dead'
RETURNING id
