-- claim_context: the server's now, queue ?'s controls, whether it has ready keyed work and
-- whether any of its jobs has waited past the starvation bound, in one statement, read after
-- the claim took the queue's lock (so a pause or limit change that returned before is seen).
-- Parameters: ?1 queue, ?2 the starvation bound (ms, NULL: none).
-- queue (controls).
-- The starvation probe is a plain read on purpose: the locking candidates_starving.sql, run
-- on every claim, locked the first *not* starving entry of jobs_age (where its range ends)
-- until commit, so two claims in flight each held a row the other was leasing and deadlocked
-- (1213). It runs now only when this says some job is starving.
SELECT n.now, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       q.tokens, q.refilled_at,
       EXISTS (SELECT 1 FROM jobs j
               WHERE j.queue = ?1 AND j.state = 'pending' AND j.run_at <= n.now
                 AND (j.ordering_key IS NOT NULL OR j.concurrency_key IS NOT NULL)) AS keyed,
       (?2 IS NOT NULL AND EXISTS (SELECT 1 FROM jobs j
               WHERE j.queue = ?1 AND j.state = 'pending' AND j.run_at <= n.now - ?2)) AS starving
FROM (SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED) AS now) n
LEFT JOIN queues q ON q.name = ?1
