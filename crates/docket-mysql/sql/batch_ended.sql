-- batch_ended: batch ?1 settled at ?2 (every member ended after close).
-- Parameters: ?1 batch id, ?2 now (ms).
UPDATE workflows SET ended_at = ?2 WHERE id = ?1 AND ended_at IS NULL
