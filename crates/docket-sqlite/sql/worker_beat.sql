-- worker_beat: worker ?1 is alive until now + ttl (and the registry forgets workers gone
-- for a day: worker_forget.sql).
-- Parameters: ?1 owner, ?2 host, ?3 pid, ?4 queues (JSON array text), ?5 concurrency,
--   ?6 in_flight, ?7 now (ms), ?8 ttl (ms), ?9 buffered (of in_flight, not yet started),
--   ?10 buffered per entry of ?4 (JSON array text; migration 0011).
INSERT INTO workers (owner, host, pid, queues, concurrency, in_flight, buffered, buffered_by_queue, started_at,
                     seen_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?9, ?10, ?7, ?7, ?7 + ?8)
ON CONFLICT (owner) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, in_flight = excluded.in_flight, buffered = excluded.buffered,
    buffered_by_queue = excluded.buffered_by_queue,
    seen_at = ?7, expires_at = excluded.expires_at
