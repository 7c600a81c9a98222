-- lease_status: what the given jobs look like now, to explain a fenced write that matched
-- nothing (superseded, finished, expired, or gone).
-- Parameters: $1 bigint[] ids.
SELECT id, state, attempt
FROM {{schema}}.jobs
WHERE id = ANY($1)
