-- worker_beat: a worker says it is alive, what it serves and how busy it is.
-- Parameters: $1 text owner, $2 text host, $3 integer pid, $4 text[] queues,
-- $5 integer concurrency, $6 integer in_flight, $7 bigint ttl_ms,
-- $8 integer buffered (of in_flight, not yet started; migration 0014), $9 integer[] the
-- buffered jobs per entry of $4 (migration 0029).
-- Upserts the row with expires_at = now() + ttl (database clock) and deletes rows that expired
-- more than a day ago, so crashed workers do not accumulate. A report only: no fence reads it.
WITH gone AS (
    DELETE FROM {{schema}}.workers WHERE expires_at < now() - interval '1 day'
)
INSERT INTO {{schema}}.workers AS w
    (owner, host, pid, queues, concurrency, in_flight, buffered, buffered_by_queue, started_at,
     seen_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $8, $9, now(), now(), now() + $7 * interval '1 millisecond')
ON CONFLICT (owner) DO UPDATE
SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    concurrency = EXCLUDED.concurrency, in_flight = EXCLUDED.in_flight, buffered = EXCLUDED.buffered,
    buffered_by_queue = EXCLUDED.buffered_by_queue,
    seen_at = now(), expires_at = EXCLUDED.expires_at
