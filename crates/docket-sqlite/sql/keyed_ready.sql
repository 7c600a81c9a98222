-- keyed_ready: whether queue ?1 has a ready job with an ordering or concurrency key (then the
-- claim decides keys job by job; otherwise it takes the first jobs in order).
-- Parameters: ?1 queue, ?2 now (ms). Served by jobs_keyed_ready_idx.
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
                 AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL))
