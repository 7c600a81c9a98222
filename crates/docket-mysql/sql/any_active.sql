-- any_active: whether active_count would be above zero, by one probe per branch.
-- Parameters: ?1 the queues (a list: one placeholder each), ?2 now (ms).
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE state = 'pending' AND run_at <= ?2 AND queue IN (?1)
                 AND queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL))
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND queue IN (?1))
