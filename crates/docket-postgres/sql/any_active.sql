-- any_active: is any job of the given queues ready now or running? Cheap at any backlog
-- size (stops at the first row, through the partial indexes); drain mode and benchmarks poll
-- it.
-- Parameters: $1 text[] queues.
SELECT EXISTS (
    SELECT 1 FROM {{schema}}.jobs
    WHERE queue = ANY($1) AND state = 'pending' AND run_at <= now()
) OR EXISTS (
    SELECT 1 FROM {{schema}}.jobs
    WHERE state = 'running' AND queue = ANY($1)
)
