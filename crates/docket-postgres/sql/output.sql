-- output: a job's state and output, for callers reading a result.
-- Parameters: $1 bigint id.
-- A plain success deleted on completion, or one past its retention, has no row (NotFound).
SELECT state, output, finished_at FROM {{schema}}.jobs WHERE id = $1
