-- claim_context: the server's now, queue ?'s controls and whether it has ready keyed work, in
-- one statement, read after the claim took the queue's lock (so a pause or limit change that
-- returned before is seen). Parameters: queue (for the keyed probe), queue (controls).
SELECT n.now, q.paused_at, q.max_running, q.key_max_running, q.rate_limit, q.rate_period_ms,
       q.tokens, q.refilled_at,
       EXISTS (SELECT 1 FROM jobs j
               WHERE j.queue = ? AND j.state = 'pending' AND j.run_at <= n.now
                 AND (j.ordering_key IS NOT NULL OR j.concurrency_key IS NOT NULL)) AS keyed
FROM (SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED) AS now) n
LEFT JOIN queues q ON q.name = ?
