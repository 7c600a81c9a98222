-- heartbeat: extends claimed jobs' leases to now + lease, fenced like complete_many.
-- Parameters: ?1 JSON array of [id, attempt] pairs, ?2 owner, ?3 now (ms), ?4 lease (ms).
-- No RETURNING: the expiry is now + lease; fenced_state.sql says which were extended when
-- fewer rows changed than leases were given, and which were asked to stop.
UPDATE jobs
SET attempt = c.attempt, lease_owner = ?2, lease_expires_at = ?3 + ?4
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
      FROM json_each(?1)) AS c
WHERE jobs.id = c.id
  AND jobs.attempt = c.attempt
  AND jobs.lease_owner = ?2
  AND jobs.lease_expires_at > ?3
