-- child_cancel: a waiting child whose parent ended without success, on a 'cancel' edge.
-- Parameters: ?1 child job id, ?2 now (ms), ?3 its errors with the reason pushed (JSON text).
UPDATE jobs SET state = 'cancelled', finished_at = ?2, errors = ?3
WHERE id = ?1 AND state = 'waiting'
