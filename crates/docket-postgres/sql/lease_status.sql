-- lease_status: what the given jobs look like now, to explain a fenced write that matched
-- nothing (superseded, finished, expired, or gone).
-- Parameters: $1 bigint[] ids.
-- A kept success is read from its packed history (migration 0035). Runs only for writes that
-- matched nothing, so the history's range lookup a missing id costs is off the hot path.
SELECT id, state, attempt
FROM {{schema}}.jobs
WHERE id = ANY($1)
UNION ALL
SELECT r.id, 'succeeded', r.attempt
FROM unnest($1::bigint[]) AS w(id)
CROSS JOIN LATERAL (
    SELECT r.id, r.attempt
    FROM {{schema}}.jobs_succeeded AS h, unnest(h.jobs) AS r
    WHERE int8range(h.lo, h.hi, '[]') @> w.id
      AND r.id = w.id
    LIMIT 1
) AS r
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.jobs AS j WHERE j.id = w.id)
