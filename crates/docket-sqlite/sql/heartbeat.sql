-- heartbeat: extends claimed jobs' leases to now + lease, fenced like complete_many.
-- Parameters: ?1 JSON array of [id, attempt] pairs, ?2 owner, ?3 now (ms), ?4 lease (ms).
-- Returns the new expiry and whether an operator asked the job to stop.
UPDATE jobs
SET attempt = c.attempt, lease_owner = ?2, lease_expires_at = ?3 + ?4
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
      FROM json_each(?1)) AS c
WHERE jobs.id = c.id
  AND jobs.attempt = c.attempt
  AND jobs.lease_owner = ?2
  AND jobs.lease_expires_at > ?3
RETURNING id, attempt, lease_expires_at, cancel_requested_at IS NOT NULL AS cancel_requested
