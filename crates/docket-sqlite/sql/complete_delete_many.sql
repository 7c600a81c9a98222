-- complete_delete_many: completes claimed jobs by deleting them, fenced, inside the caller's
-- write transaction (which first read, with fenced_state.sql, which leases still hold; no
-- other writer can change them before this statement: SQLite has one writer at a time).
-- Parameters: ?1 JSON array of [id, attempt] pairs, ?2 owner, ?3 now (ms).
-- Invariant (the fence): a row goes only while the caller's claim still holds it — same
-- attempt, same owner, lease not expired by the database's clock.
WITH c AS (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
           FROM json_each(?1))
DELETE FROM jobs
WHERE id IN (SELECT id FROM c)
  AND attempt = (SELECT c.attempt FROM c WHERE c.id = jobs.id)
  AND lease_owner = ?2
  AND lease_expires_at > ?3
