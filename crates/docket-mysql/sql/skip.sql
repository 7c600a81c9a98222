-- skip: a dead job becomes cancelled (history kept), releasing its ordering key.
-- Parameters: ?1 id, ?2 now (ms), ?3 errors (JSON).
UPDATE jobs SET state = 'cancelled', finished_at = ?2, errors = ?3 WHERE id = ?1 AND state = 'dead'
