-- lease_status: what the given jobs look like now, to explain a fenced write that matched
-- nothing (superseded, finished, expired, or gone).
-- Parameters: $1 bigint[] ids.
-- A kept success is read from its packed history (migration 0035). Runs only for writes that
-- matched nothing, so the history lookup (kept_job()) a missing id costs is off the hot path.
SELECT id, state, attempt
FROM {{schema}}.jobs
WHERE id = ANY($1)
UNION ALL
SELECT (k.job).id, 'succeeded', (k.job).attempt
FROM unnest($1::bigint[]) AS w(id)
CROSS JOIN LATERAL {{schema}}.kept_job(w.id) AS k
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.jobs AS j WHERE j.id = w.id)
