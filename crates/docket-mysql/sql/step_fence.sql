-- step_fence: the claim's check before a step is recorded, locking the job's row until the
-- transaction ends (the reaper and other writers of the job wait for it).
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms; unused: the lease is judged by
-- SYSDATE(3), the clock when the row is reached after any lock wait).
-- A row only while the caller's claim holds the job: same attempt, same owner, running,
-- lease unexpired.
SELECT id FROM jobs FORCE INDEX (PRIMARY)
WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND state = 'running'
  AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
FOR UPDATE
