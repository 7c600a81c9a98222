-- queue_pause: a queue hands out nothing from the next claim on. The caller holds the queue's
-- exclusive lock (claims in flight have committed). Parameters: queue, now, now, now (ms).
INSERT INTO queues (name, paused_at, refilled_at, updated_at) VALUES (?1, ?2, ?2, ?2)
ON DUPLICATE KEY UPDATE paused_at = COALESCE(paused_at, VALUES(paused_at)),
                        updated_at = VALUES(updated_at)
