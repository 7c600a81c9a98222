-- any_active: whether active_count would be above zero, at any backlog's cost of one probe
-- per queue. Parameters: ?1 JSON array of queues, ?2 now (ms).
SELECT EXISTS (
    SELECT 1 FROM json_each(?1) q
    WHERE q.value NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL)
      AND EXISTS (SELECT 1 FROM jobs j
                  WHERE j.state = 'pending' AND j.queue = q.value AND j.run_at <= ?2)
) OR EXISTS (
    SELECT 1 FROM json_each(?1) q
    WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'running' AND j.queue = q.value)
)
