-- cancel: cancel a pending job at once, or flag a running one so its worker stops it.
-- Parameters: $1 bigint id.
-- Returns the state the job had before (pending or running); no row when the job is missing
-- or already terminal. A running job stays running (its lease and token unchanged) until its
-- worker records the cancellation through a fenced write, or the reaper takes it back.
WITH cur AS (
    SELECT id, state FROM {{schema}}.jobs WHERE id = $1 FOR UPDATE
)
UPDATE {{schema}}.jobs AS j
SET state = CASE WHEN cur.state = 'pending' THEN 'cancelled' ELSE j.state END,
    finished_at = CASE WHEN cur.state = 'pending' THEN now() ELSE j.finished_at END,
    cancel_requested_at = coalesce(j.cancel_requested_at, now()),
    blocked = false
FROM cur
WHERE j.id = cur.id AND cur.state IN ('pending', 'running')
RETURNING cur.state AS previous_state
