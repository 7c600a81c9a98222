-- retry: replay a dead or cancelled job now, keeping its id, attempt counter and history,
-- through retry_job() (migration 0016).
-- Parameters: $1 bigint id, $2 int extra attempts (1..=1000).
-- The budget becomes attempt + extra. A unique key already held by another live job raises
-- unique_violation.
SELECT id FROM {{schema}}.retry_job($1, $2)
