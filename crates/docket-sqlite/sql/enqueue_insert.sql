-- enqueue_insert: one new pending job.
-- Parameters: ?1 queue, ?2 kind, ?3 args (JSON text), ?4 priority, ?5 run_at (ms),
--   ?6 max_attempts, ?7 unique_key, ?8 metadata (JSON text), ?9 backoff_base_ms,
--   ?10 backoff_cap_ms, ?11 ordering_key, ?12 concurrency_key, ?13 now (ms, created_at).
-- Invariants: every value was validated by docket_core::validate::new_job first; the table's
-- CHECKs repeat the bounds for anyone writing the file directly. A unique key held by an
-- unfinished job fails this statement alone (SQLITE_CONSTRAINT_UNIQUE on
-- jobs_unique_key_idx); the caller then returns the holder (unique_holder.sql).
INSERT INTO jobs (queue, kind, args, priority, run_at, max_attempts, unique_key, metadata,
                  backoff_base_ms, backoff_cap_ms, ordering_key, concurrency_key, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
