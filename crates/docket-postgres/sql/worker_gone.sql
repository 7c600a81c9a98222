-- worker_gone: a stopping worker marks its row stopped (migration 0024) and ends its expiry;
-- the row stays a day for the dashboard's "recently gone" (a crashed one just expires).
-- Parameters: $1 text owner.
UPDATE {{schema}}.workers
SET stopped_at = now(), expires_at = least(expires_at, now()), in_flight = 0, buffered = 0,
    buffered_by_queue = '{}'
WHERE owner = $1
