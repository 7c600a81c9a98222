-- snooze_many: puts claimed jobs back to pending after a delay without spending their
-- budget (max_attempts + 1 balances the claim's attempt + 1), fenced like complete_many; a
-- job an operator asked to cancel becomes cancelled instead. Also the release at shutdown
-- (delay 0).
-- Parameters: ?1 JSON array of [id, attempt, delay_ms] triples, ?2 owner, ?3 now (ms).
UPDATE jobs
SET attempt = c.attempt,
    state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE ?3 END,
    run_at = ?3 + c.delay_ms,
    max_attempts = max_attempts + 1,
    released = released + 1,
    lease_owner = NULL,
    lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt,
             json_extract(value, '$[2]') AS delay_ms
      FROM json_each(?1)) AS c
WHERE jobs.id = c.id
  AND jobs.attempt = c.attempt
  AND jobs.lease_owner = ?2
  AND jobs.lease_expires_at > ?3
RETURNING id, attempt, queue
