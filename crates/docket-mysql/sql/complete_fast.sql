-- complete_fast: marks claimed jobs succeeded in one autocommit statement, fenced (same
-- attempt, same owner, lease unexpired by SYSDATE(3), the clock when each row is reached after
-- any lock wait: see fenced_select.sql). When fewer rows changed than leases were given, the
-- caller reads which ones finished at this now (complete_check.sql).
-- Parameters: now (ms, finished_at), owner, then (id, attempt) pairs (/*pairs*/ expanded).
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'succeeded', finished_at = ?, lease_owner = NULL, lease_expires_at = NULL
WHERE lease_owner = ? AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED) AND state = 'running'
  AND (id, attempt) IN (/*pairs*/)
