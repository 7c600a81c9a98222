-- active_count: jobs of the queues in ?1 that are ready now in an unpaused queue, or running
-- (drain mode stops at zero). Parameters: ?1 JSON array of queues, ?2 now (ms).
SELECT count(*) FROM jobs
WHERE queue IN (SELECT value FROM json_each(?1))
  AND ((state = 'pending' AND run_at <= ?2
        AND queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL))
       OR state = 'running')
