-- active_count: jobs of the given queues that are ready now or running; drain mode stops
-- when this reaches zero. Future-scheduled jobs, blocked jobs and paused queues do not count.
-- Parameters: $1 text[] queues.
SELECT count(*)
FROM {{schema}}.jobs
WHERE queue = ANY($1)
  AND ((state = 'pending' AND NOT blocked AND run_at <= now()
        AND queue NOT IN (SELECT name FROM {{schema}}.queues WHERE paused_at IS NOT NULL))
       OR state = 'running')
