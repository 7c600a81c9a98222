-- child_satisfied: one edge into a waiting child is satisfied; the last one makes it pending,
-- due now.
-- Parameters: ?1 child job id, ?2 now (ms).
-- deps_waiting is assigned last: MariaDB assigns left to right, and the CASEs must read the
-- count before the decrement (as SQLite and PostgreSQL always do).
UPDATE jobs
SET run_at = CASE WHEN deps_waiting = 1 THEN ?2 ELSE run_at END,
    state = CASE WHEN deps_waiting = 1 THEN 'pending' ELSE state END,
    deps_waiting = deps_waiting - 1
WHERE id = ?1 AND state = 'waiting'
