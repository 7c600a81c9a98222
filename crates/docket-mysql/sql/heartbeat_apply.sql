-- heartbeat_apply: extends the leases fenced_select kept to the given expiry.
-- Parameters: expiry (ms), owner, then the ids (/*ids*/ expanded).
UPDATE jobs SET lease_expires_at = ? WHERE lease_owner = ? AND state = 'running' AND id IN (/*ids*/)
