-- worker_gone: worker ?1 stopped at ?2 (ms): its row is marked stopped and its expiry ended;
-- it stays a day for the dashboard's "recently gone" (worker_forget.sql).
UPDATE workers SET stopped_at = ?2, expires_at = min(expires_at, ?2), in_flight = 0, buffered = 0,
    buffered_by_queue = NULL
WHERE owner = ?1
