-- The floor's claim, 2 of 3: lease the locked batch, attempt + 1.
-- Parameters: lease until (ms), then the ids (/*ids*/ expanded).
UPDATE floor_jobs SET status = 'running', attempts = attempts + 1, locked_until = ?
WHERE id IN (/*ids*/)
