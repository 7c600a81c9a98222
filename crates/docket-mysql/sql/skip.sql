-- skip: a dead job becomes cancelled (history kept), releasing its ordering key.
-- Parameters: now (ms), errors (JSON), id.
UPDATE jobs SET state = 'cancelled', finished_at = ?, errors = ? WHERE id = ? AND state = 'dead'
