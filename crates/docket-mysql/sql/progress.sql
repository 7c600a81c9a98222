-- progress: records one running job's progress, fenced.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms), ?5 percent, ?6 message.
-- Invariant (the fence, as heartbeat_apply.sql): the row changes only while the caller's claim
-- still holds it — same attempt, same owner, running, lease unexpired by SYSDATE(3) (the clock
-- when the row is reached after any lock wait); the lease is not extended. The caller counts
-- the rows changed (0 or 1).
UPDATE jobs FORCE INDEX (PRIMARY)
SET progress_percent = ?5, progress_message = ?6, progress_at = ?4
WHERE id = ?1
  AND attempt = ?2
  AND lease_owner = ?3
  AND state = 'running'
  AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
