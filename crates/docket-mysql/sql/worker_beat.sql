-- worker_beat: a worker is alive until now + ttl (its start kept across beats).
-- Parameters: ?1 owner, ?2 host, ?3 pid, ?4 queues (JSON), ?5 concurrency, ?6 in flight,
--   ?7 now (ms), ?8 ttl (ms), ?9 buffered, ?10 buffered per entry of ?4
--   (JSON array text; migration 0011).
INSERT INTO workers (owner, host, pid, queues, concurrency, in_flight, buffered, buffered_by_queue, started_at,
                     seen_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?9, ?10, ?7, ?7, ?7 + ?8)
ON DUPLICATE KEY UPDATE
    host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
    concurrency = VALUES(concurrency), in_flight = VALUES(in_flight), buffered = VALUES(buffered),
    buffered_by_queue = VALUES(buffered_by_queue),
    seen_at = VALUES(seen_at), expires_at = VALUES(expires_at)
