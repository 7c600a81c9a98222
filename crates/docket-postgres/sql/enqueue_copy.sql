-- enqueue_copy: the bulk path for large batches without unique keys: COPY FROM STDIN (text
-- format), one row per job, built and validated by crates/docket-postgres/src/enqueue.rs.
-- No parameters (the rows are the COPY data). Every table constraint still applies; ids come
-- from enqueue_copy_ids in the same transaction. The wake-up is sent by the caller afterwards
-- (sql/notify.sql), delivered at commit like enqueue_many's.
-- Measured: see docs/benchmarks.md ("Bulk enqueue").
COPY {{schema}}.jobs (id, queue, kind, args, priority, run_at, max_attempts, metadata,
                      backoff_base_ms, backoff_cap_ms, ordering_key, concurrency_key)
FROM STDIN
