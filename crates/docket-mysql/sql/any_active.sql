-- any_active: whether active_count would be above zero, by one probe per branch.
-- Parameters: now (ms), then the queues (/*queues*/ expanded), twice.
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE state = 'pending' AND run_at <= ? AND queue IN (/*queues*/)
                 AND queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL))
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND queue IN (/*queues*/))
