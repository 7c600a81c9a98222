-- lab_for_update: lock the candidate with FOR UPDATE. Correct (a waiter re-checks the row and
-- moves on) but every worker queues behind the same first row: serialised waiting.
-- No parameters. Returns the id it finished, or no row when nothing is queued.
UPDATE {{schema}}.lab_jobs
SET status = 'done', claims = claims + 1
WHERE id = (SELECT id FROM {{schema}}.lab_jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE)
RETURNING id
