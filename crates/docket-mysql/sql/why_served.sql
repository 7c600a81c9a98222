-- why_served: whether a live worker serves the queue. Parameters: now (ms), queue.
SELECT EXISTS (SELECT 1 FROM workers w
               WHERE w.expires_at > ?2 AND JSON_CONTAINS(w.queues, JSON_QUOTE(?1)))
