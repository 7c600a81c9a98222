-- queue_resume: queue ?1 is claimed from again. Parameters: ?1 queue, ?2 now (ms).
UPDATE queues SET paused_at = NULL, updated_at = ?2 WHERE name = ?1
