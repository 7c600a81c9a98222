-- unique_holder: the live job holding a unique key (to report a conflict on retry).
-- Parameters: $1 text unique key.
SELECT id
FROM {{schema}}.jobs
WHERE unique_key = $1 AND state IN ('pending', 'running')
