-- keyed_ready: whether queue ? has a ready job with an ordering or concurrency key.
-- Parameters: queue, now (ms).
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE queue = ? AND state = 'pending' AND run_at <= ?
                 AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL))
