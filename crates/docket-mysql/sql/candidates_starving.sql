-- candidates_starving: ids of a queue's jobs ready since before the bound's instant, oldest
-- first — a plain read, not locked: candidates_lock.sql then locks them by primary key.
-- Parameters: queue, the instant (ms), how many. Served by jobs_age.
-- Why two steps: a locking (SKIP LOCKED) scan of jobs_age keeps its lock on the entry where
-- the range ends — the oldest job *not* starving, or the next starving one past the LIMIT —
-- until commit, and a claim in flight that was leasing that very job then waited for it
-- while this one waited for one of its own: deadlock (1213), caught by the conformance case
-- racing_claims_never_fail_or_share_a_job.
SELECT id
FROM jobs
WHERE queue = ? AND state = 'pending' AND run_at <= ?
ORDER BY run_at, id
LIMIT ?
