-- periodic_pause: pauses ($2 true; the first pause's time stands) or resumes ($2 false) the
-- periodic schedule $1. No row: no such schedule.
-- Parameters: $1 text name, $2 boolean paused.
UPDATE {{schema}}.periodic
SET paused_at = CASE WHEN $2 THEN coalesce(paused_at, now()) END, updated_at = now()
WHERE name = $1
RETURNING name
