-- enqueue_many: insert jobs through the schema's SQL function (validation, unique keys,
-- ordering and concurrency keys, one wake-up per queue), so Rust and every other language
-- share one code path.
-- Parameters: parallel arrays $1 queues, $2 kinds, $3 args jsonb[], $4 priorities smallint[],
--   $5 run_ats timestamptz[], $6 delays_ms bigint[], $7 max_attempts int[],
--   $8 unique_keys text[], $9 metadata jsonb[], $10 backoff_base_ms bigint[],
--   $11 backoff_cap_ms bigint[], $12 ordering_keys text[], $13 concurrency_keys text[]
--   ($8, $12 and $13 NULL when no job has one: the common case skips their work).
-- Returns (ord, id, duplicate) per input row in input order. Runs on whatever executor the
-- caller gives: a pool, or the caller's own transaction (transactional enqueue).
SELECT ord, id, duplicate
FROM {{schema}}.enqueue_jobs($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ORDER BY ord
