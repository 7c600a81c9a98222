-- claim_lease: leases the chosen (locked, pending) jobs and bumps their attempt.
-- Parameters: owner, now (ms), now (ms), lease (ms), then the ids (the list /*ids*/ is
-- expanded to one bound placeholder per id).
-- FORCE INDEX (PRIMARY): with stale statistics (a table loaded in one burst) the optimizer
-- reads this through jobs_lease's (state, ...) range instead, locking other claims' rows
-- on the way, and two concurrent claims or completions deadlocked (1213) on the bench.
UPDATE jobs FORCE INDEX (PRIMARY)
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?,
    attempted_at = ?,
    lease_expires_at = ? + ?
WHERE state = 'pending' AND id IN (/*ids*/)
