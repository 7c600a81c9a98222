-- complete_many: marks claimed jobs succeeded, fenced.
-- Parameters: ?1 JSON array of [id, attempt] pairs, ?2 owner, ?3 now (ms).
-- No RETURNING (every returned row is a thread hand-off in sqlx-sqlite): when fewer rows
-- changed than leases were given, fenced_state.sql in the same transaction says which.
-- Invariant (the fence): a row changes only while the caller's claim still holds it — same
-- attempt, same owner, lease not expired by the database's clock.
-- `attempt = c.attempt` is a no-op while the fence holds: it carries the writer's token into
-- the row, so an audit (docket-testkit's checker) sees a write that slipped past a fence.
UPDATE jobs
SET state = 'succeeded', attempt = c.attempt, finished_at = ?3, lease_owner = NULL, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
      FROM json_each(?1)) AS c
WHERE jobs.id = c.id
  AND jobs.attempt = c.attempt
  AND jobs.lease_owner = ?2
  AND jobs.lease_expires_at > ?3
