-- leader_resign: give up leadership at once (on shutdown) so another worker takes over
-- without waiting for the expiry.
-- Parameters: $1 text owner.
DELETE FROM {{schema}}.leader WHERE name = 'maintenance' AND owner = $1
