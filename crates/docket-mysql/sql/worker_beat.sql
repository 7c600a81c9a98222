-- worker_beat: a worker is alive until now + ttl (its start kept across beats).
-- Parameters: owner, host, pid, queues (JSON array), concurrency, in_flight, buffered (of
--   in_flight, not yet started), now, now, expires_at (ms).
INSERT INTO workers (owner, host, pid, queues, concurrency, in_flight, buffered, started_at, seen_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
    concurrency = VALUES(concurrency), in_flight = VALUES(in_flight), buffered = VALUES(buffered),
    seen_at = VALUES(seen_at), expires_at = VALUES(expires_at)
