-- cancel: cancel a pending job at once, or flag a running one so its worker stops it.
-- Parameters: $1 bigint id.
-- Returns the state the job had before (pending or running); no row when the job is missing
-- or already terminal. A running job stays running (its lease and token unchanged) until its
-- worker records the cancellation through a fenced write, or the reaper takes it back.
-- Audit: the request is recorded in the job's history (class `cancel_requested`, with the
-- database role that asked). Workers stop a running job only when they read
-- cancel_requested_at back (heartbeat); the NOTIFY that follows is only a hint to look now,
-- so a forged notification from any role cancels nothing.
WITH cur AS (
    SELECT id, state FROM {{schema}}.jobs WHERE id = $1 FOR UPDATE
)
UPDATE {{schema}}.jobs AS j
SET state = CASE WHEN cur.state = 'pending' THEN 'cancelled' ELSE j.state END,
    finished_at = CASE WHEN cur.state = 'pending' THEN now() ELSE j.finished_at END,
    cancel_requested_at = coalesce(j.cancel_requested_at, now()),
    errors = CASE WHEN j.cancel_requested_at IS NULL
                  THEN {{schema}}.push_error(j.errors, jsonb_build_object(
                       'attempt', j.attempt - j.released, 'at', now(), 'class', 'cancel_requested',
                       'owner', session_user::text,
                       'message', 'cancel requested by role ' || session_user::text))
                  ELSE j.errors END,
    blocked = false
FROM cur
WHERE j.id = cur.id AND cur.state IN ('pending', 'running')
RETURNING cur.state AS previous_state
