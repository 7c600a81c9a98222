-- queue_pause: queue ?1 hands out nothing from the next claim on (claims are serialised
-- with this write). Parameters: ?1 queue, ?2 now (ms).
INSERT INTO queues (name, paused_at, refilled_at, updated_at) VALUES (?1, ?2, ?2, ?2)
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(paused_at, ?2), updated_at = ?2
