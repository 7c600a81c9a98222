-- any_active: is any job of the given queues ready now or running? Cheap at any backlog
-- size (stops at the first row, through the partial indexes); drain mode and benchmarks poll
-- it. Blocked jobs (waiting for their key) and paused queues do not count: no worker can
-- take them, so a draining worker must not wait for them.
-- Parameters: $1 text[] queues.
SELECT EXISTS (
    SELECT 1 FROM {{schema}}.jobs
    WHERE queue = ANY($1) AND state = 'pending' AND NOT blocked AND run_at <= now()
      AND queue NOT IN (SELECT name FROM {{schema}}.queues WHERE paused_at IS NOT NULL)
) OR EXISTS (
    SELECT 1 FROM {{schema}}.jobs
    WHERE state = 'running' AND queue = ANY($1)
)
