-- why_ahead: how many ready jobs of the queue a strict-order claim takes before the job (at
-- most 10,000 counted), leaving out jobs of keys out of tokens (the claim walks past them).
-- Parameters: ?1 queue, ?2 id, ?3 priority, ?4 run_at (ms), ?5 now (ms).
SELECT COUNT(*) FROM (
    SELECT 1 FROM jobs
    WHERE queue = ?1 AND state = 'pending' AND run_at <= ?5 AND id <> ?2
      AND (priority, run_at, id) < (?3, ?4, ?2)
      AND NOT EXISTS (SELECT 1 FROM key_limits kl
                      WHERE kl.ckey = jobs.concurrency_key AND kl.rate_limit IS NOT NULL
                        AND LEAST(kl.rate_limit, kl.tokens + GREATEST(0, ?5 - kl.refilled_at)
                                                 * kl.rate_limit / kl.rate_period_ms) < 1)
    LIMIT 10000) a
