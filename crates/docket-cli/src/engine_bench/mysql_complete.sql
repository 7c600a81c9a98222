-- The floor's fenced completion of a claimed batch (autocommit).
-- Parameters: (id, attempt) pairs (/*pairs*/ expanded).
UPDATE floor_jobs SET status = 'done', locked_until = NULL
WHERE (id, attempts) IN (/*pairs*/) AND status = 'running'
