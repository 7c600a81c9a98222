-- complete_many (all or nothing): marks claimed jobs succeeded, fenced, in one autocommit
-- statement — but only when every lease given still holds; otherwise it changes nothing and
-- complete_many.sql, in a transaction, applies what it can and says which were refused.
-- Parameters: ?1 JSON array of distinct [id, attempt] pairs, ?2 owner, ?3 how many pairs.
-- Invariant (the fence): as complete_many.sql — a row changes only while the caller's claim
-- still holds it (same attempt, same owner, lease not expired by the database's clock); the
-- count guard is evaluated once, before any row changes, so a batch is never half applied.
-- now is the statement's own clock (`unixepoch('subsec')` is one instant for the whole
-- statement), so no separate read of it is needed.
WITH c AS (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
           FROM json_each(?1)),
     t AS (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now)
UPDATE jobs
SET state = 'succeeded', attempt = c.attempt, finished_at = t.now, lease_owner = NULL, lease_expires_at = NULL
FROM c, t
WHERE jobs.id = c.id
  AND jobs.attempt = c.attempt
  AND jobs.lease_owner = ?2
  AND jobs.lease_expires_at > t.now
  AND (SELECT count(*) FROM c JOIN jobs AS j ON j.id = c.id
       WHERE j.attempt = c.attempt AND j.lease_owner = ?2
         AND j.lease_expires_at > (SELECT now FROM t)) = ?3
