-- output: a job's state and output, for callers reading a result.
-- Parameters: $1 bigint id.
-- A plain success deleted on completion, or one past its retention, has no row (NotFound).
-- A kept plain success lives in its packed history (migration 0035) and has no output.
SELECT state, output, finished_at FROM {{schema}}.jobs WHERE id = $1
UNION ALL
SELECT 'succeeded'::text, NULL::jsonb, k.finished_at FROM {{schema}}.kept_job($1) AS k
LIMIT 1
