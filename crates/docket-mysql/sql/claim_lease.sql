-- claim_lease: leases the chosen (locked, pending) jobs and bumps their attempt.
-- Parameters: ?1 the ids (a list: one placeholder each), ?2 owner, ?3 now (ms), ?4 lease
-- (ms).
-- FORCE INDEX (PRIMARY): every by-id write of a claim, completion or heartbeat goes through
-- the primary key only. On a freshly loaded table (stale statistics) EXPLAIN chose
-- jobs_lease's (state, ...) range for this statement, which would lock rows of other claims
-- on the way. (The 1213 deadlocks seen on the bench came from the starvation probe, not from
-- this: see candidates_starving.sql.)
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?2,
    attempted_at = ?3,
    lease_expires_at = ?3 + ?4
WHERE state = 'pending' AND id IN (?1)
