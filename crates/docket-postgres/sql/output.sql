-- output: a job's state and output, for callers reading a result.
-- Parameters: $1 bigint id.
-- A plain success deleted on completion, or one past its retention, has no row (NotFound).
-- A kept plain success lives in its packed history (migration 0035) and has no output.
SELECT state, output, finished_at FROM {{schema}}.jobs WHERE id = $1
UNION ALL
SELECT * FROM (
    SELECT 'succeeded'::text, NULL::jsonb, h.finished_at
    FROM {{schema}}.jobs_succeeded AS h, unnest(h.jobs) AS r
    WHERE int8range(h.lo, h.hi, '[]') @> $1::bigint
      AND r.id = $1
    LIMIT 1
) AS kept
LIMIT 1
