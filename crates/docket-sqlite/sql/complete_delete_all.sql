-- complete_delete_all (all or nothing): completes claimed jobs by deleting them (a worker that
-- does not keep succeeded jobs), fenced, in one autocommit statement — but only when every
-- lease given still holds; otherwise it deletes nothing and complete_delete_many.sql, in a
-- transaction, deletes what it may and says which were refused.
-- Parameters: ?1 JSON array of distinct [id, attempt] pairs, ?2 owner, ?3 how many pairs.
-- Invariant (the fence): as complete_all.sql — a row goes only while the caller's claim still
-- holds it (same attempt, same owner, lease not expired by the database's clock); the count
-- guard does not depend on the row, so it is judged once, before any row goes.
-- Ordering keys need no release here: this engine decides them at claim time from the rows
-- that are left (ordering_behind.sql), and a deleted row is as finished as a succeeded one.
WITH c AS (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
           FROM json_each(?1)),
     t AS (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now)
DELETE FROM jobs
WHERE id IN (SELECT id FROM c)
  AND attempt = (SELECT c.attempt FROM c WHERE c.id = jobs.id)
  AND lease_owner = ?2
  AND lease_expires_at > (SELECT now FROM t)
  AND (SELECT count(*) FROM c JOIN jobs AS j ON j.id = c.id
       WHERE j.attempt = c.attempt AND j.lease_owner = ?2
         AND j.lease_expires_at > (SELECT now FROM t)) = ?3
