-- lab_skip_locked: lock the candidate with FOR UPDATE SKIP LOCKED: each worker takes a
-- different row without waiting. Correct and parallel.
-- No parameters. Returns the id it finished, or no row when nothing is queued.
UPDATE {{schema}}.lab_jobs
SET status = 'done', claims = claims + 1
WHERE id = (SELECT id FROM {{schema}}.lab_jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
