-- hand_over_keys: hand on the keys whose release could not be done when their job finished
-- (recorded in key_handovers by the trigger jobs_release_keys; migration 0017), at most $1.
-- Returns how many jobs were unflagged.
-- Parameters: $1 int batch.
SELECT {{schema}}.hand_over_keys($1)::bigint
