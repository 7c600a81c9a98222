-- complete_fast: marks claimed jobs succeeded in one autocommit statement, fenced (same
-- attempt, same owner, lease unexpired at now). When fewer rows changed than leases were
-- given, the caller reads which ones finished at this now (complete_check.sql).
-- Parameters: now (ms), owner, now (ms), then (id, attempt) pairs (/*pairs*/ expanded).
UPDATE jobs
SET state = 'succeeded', finished_at = ?, lease_owner = NULL, lease_expires_at = NULL
WHERE lease_owner = ? AND lease_expires_at > ? AND state = 'running'
  AND (id, attempt) IN (/*pairs*/)
