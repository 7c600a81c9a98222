-- active_count: jobs of the given queues that are ready now or running; drain mode stops
-- when this reaches zero. Future-scheduled jobs do not count.
-- Parameters: $1 text[] queues.
SELECT count(*)
FROM {{schema}}.jobs
WHERE queue = ANY($1)
  AND ((state = 'pending' AND run_at <= now()) OR state = 'running')
