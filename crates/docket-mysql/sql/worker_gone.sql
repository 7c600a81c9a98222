-- worker_gone: a worker stopped: its row is marked stopped and its expiry ended; it stays a
-- day for the dashboard's "recently gone" (worker_forget.sql). Parameters: ?1 owner, ?2 now (ms).
UPDATE workers SET stopped_at = ?2, expires_at = LEAST(expires_at, ?2), in_flight = 0, buffered = 0,
    buffered_by_queue = NULL
WHERE owner = ?1
