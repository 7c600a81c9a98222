-- queue_resume: a queue is claimed from again. Parameters: now (ms), queue.
UPDATE queues SET paused_at = NULL, updated_at = ?2 WHERE name = ?1
