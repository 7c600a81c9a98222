-- leader_try: take or renew maintenance leadership.
-- Parameters: $1 text owner (the worker identity), $2 bigint ttl_ms.
-- Returns true when $1 leads until now() + ttl. The row is taken over only when it is free
-- or expired (database clock), so at most one live leader exists; the expiry bounds how long
-- a crashed or paused leader blocks maintenance. Maintenance itself is safe to run twice
-- (SKIP LOCKED, fenced updates), so a leader that learns late it lost the row does no harm.
INSERT INTO {{schema}}.leader AS l (name, owner, expires_at)
VALUES ('maintenance', $1, now() + $2 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.expires_at < now()
RETURNING owner = $1 AS leading
