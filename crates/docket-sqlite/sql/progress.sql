-- progress: records one running job's progress, fenced.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms), ?5 percent, ?6 message.
-- Invariant (the fence, as heartbeat.sql): the row changes only while the caller's claim still
-- holds it — same attempt, same owner, lease not expired by the database's clock; the lease
-- is not extended. The caller counts the rows changed (0 or 1).
UPDATE jobs
SET progress_percent = ?5, progress_message = ?6, progress_at = ?4
WHERE id = ?1
  AND attempt = ?2
  AND lease_owner = ?3
  AND lease_expires_at > ?4
