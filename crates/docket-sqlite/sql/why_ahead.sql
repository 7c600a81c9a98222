-- why_ahead: how many ready jobs of the queue a strict-order claim takes before job ?2
-- (at most 10,000 counted). Parameters: ?1 queue, ?2 id, ?3 priority, ?4 run_at (ms),
--   ?5 now (ms).
SELECT count(*) FROM (
    SELECT 1 FROM jobs
    WHERE state = 'pending' AND queue = ?1 AND run_at <= ?5 AND id <> ?2
      AND (priority, run_at, id) < (?3, ?4, ?2)
    LIMIT 10000)
