-- claim_lease: leases the chosen (locked, pending) jobs and bumps their attempt.
-- Parameters: owner, now (ms), now (ms), lease (ms), then the ids (the list /*ids*/ is
-- expanded to one bound placeholder per id).
-- FORCE INDEX (PRIMARY): every by-id write of a claim, completion or heartbeat goes through
-- the primary key only. On a freshly loaded table (stale statistics) EXPLAIN chose
-- jobs_lease's (state, ...) range for this statement, which would lock rows of other claims
-- on the way. (The 1213 deadlocks seen on the bench came from the starvation probe, not from
-- this: see candidates_starving.sql.)
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?,
    attempted_at = ?,
    lease_expires_at = ? + ?
WHERE state = 'pending' AND id IN (/*ids*/)
