-- batch_close: closes batch ?1 (again: nothing changes).
-- Parameters: ?1 batch id, ?2 now (ms).
UPDATE workflows SET closed_at = coalesce(closed_at, ?2) WHERE id = ?1
