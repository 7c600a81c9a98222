-- cancel: cancel a pending job at once, or flag a running one so its worker stops it, through
-- cancel_job() (migration 0016).
-- Parameters: $1 bigint id.
-- Returns the state the job had before (pending or running); no row when the job is missing
-- or already terminal. The request is kept in the job's history with the login role that
-- asked. Workers stop a running job only when they read the flag back (heartbeat); the
-- NOTIFY that follows is only a hint, so a forged notification cancels nothing.
SELECT previous_state FROM {{schema}}.cancel_job($1)
