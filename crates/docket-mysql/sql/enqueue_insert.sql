-- enqueue_insert: one new pending job.
-- Parameters: queue, kind, args (JSON text), priority, run_at (ms), max_attempts,
--   unique_key, metadata (JSON text), backoff_base_ms, backoff_cap_ms, ordering_key,
--   concurrency_key, now (ms, created_at).
-- Invariants: every value was validated by docket_core::validate::new_job first; the table's
-- CHECKs repeat the bounds. A unique key held by an unfinished job fails with ER_DUP_ENTRY
-- on jobs_unique_active (the caller then returns the holder); a concurrent insert of the
-- same key waits for the other transaction and then fails or succeeds.
INSERT INTO jobs (queue, kind, args, priority, run_at, max_attempts, unique_key, metadata,
                  backoff_base_ms, backoff_cap_ms, ordering_key, concurrency_key, created_at,
                  errors)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]')
