-- active_count: jobs of the queues named that are ready now in an unpaused queue, or
-- running. Parameters: now (ms), then the queues (/*queues*/ expanded), twice.
SELECT COUNT(*) FROM jobs
WHERE ((state = 'pending' AND run_at <= ?2 AND queue IN (?1)
        AND queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL))
       OR (state = 'running' AND queue IN (?1)))
