-- lab_naive: the broken claim from the design — pick the first queued id in a subquery
-- without a lock, then update it. Concurrent workers pick the same id; the loser waits on the
-- row lock, re-checks only "id = X" (still true) and claims it again.
-- No parameters. Returns the id it "finished", or no row when nothing is queued.
UPDATE {{schema}}.lab_jobs
SET status = 'done', claims = claims + 1
WHERE id = (SELECT id FROM {{schema}}.lab_jobs WHERE status = 'queued' ORDER BY id LIMIT 1)
RETURNING id
