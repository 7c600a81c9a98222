-- complete_output: marks one claimed job succeeded with its output, fenced.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms, finished_at), ?5 the output (JSON text).
-- Invariant (the fence, as complete_fast.sql): the row changes only while the caller's claim
-- still holds it — same attempt, same owner, running, lease unexpired by SYSDATE(3), the clock
-- when the row is reached after any lock wait — so a stale attempt records no output. The
-- caller counts the rows changed (0 or 1).
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'succeeded', finished_at = ?4, lease_owner = NULL, lease_expires_at = NULL,
    output = ?5
WHERE id = ?1
  AND attempt = ?2
  AND lease_owner = ?3
  AND state = 'running'
  AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
