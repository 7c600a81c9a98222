-- complete_output: marks one claimed job succeeded with its output, fenced.
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms), ?5 the output (JSON text).
-- Invariant (the fence, as complete_many.sql): the row changes only while the caller's claim
-- still holds it — same attempt, same owner, lease not expired by the database's clock — so a
-- stale attempt records no output. The caller counts the rows changed (0 or 1).
UPDATE jobs
SET state = 'succeeded', attempt = ?2, finished_at = ?4, lease_owner = NULL,
    lease_expires_at = NULL, output = ?5
WHERE id = ?1
  AND attempt = ?2
  AND lease_owner = ?3
  AND lease_expires_at > ?4
