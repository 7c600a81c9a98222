-- why_ahead: how many ready jobs of the queue a strict-order claim takes before the job (at
-- most 10,000 counted). Parameters: queue, now, id, priority, run_at, id.
SELECT COUNT(*) FROM (
    SELECT 1 FROM jobs
    WHERE queue = ? AND state = 'pending' AND run_at <= ? AND id <> ?
      AND (priority, run_at, id) < (?, ?, ?)
    LIMIT 10000) a
