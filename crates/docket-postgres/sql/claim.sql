-- claim: hand up to $2 ready jobs of queue $1 to owner $3 with a lease of $4 ms.
-- Parameters: $1 text queue, $2 int limit, $3 text owner, $4 bigint lease_ms,
--   $5 bigint starvation bound in ms (NULL: strict priority order), $6 int the most jobs
--   that hold a limit or key while running it may take (the worker's free run slots; NULL: no
--   separate bound; migration 0014), $7 smallint and $8 timestamptz the claim-order position
--   (priority, run_at) to start the scan at (NULL, NULL: from the head; migration 0036, set
--   only while an old snapshot holds vacuum back: src/scan_hint.rs). The sixth argument of
--   claim(), true, lets this claim (always a transaction of its own) commit without waiting
--   for its WAL flush: a claim lost in a server crash leaves the job pending with the attempt
--   it had (migration 0011; docs/guarantees.md). `docket.durable_claims = on` turns it off.
-- The claim() function (migration 0005) takes a shared lock on the queue (so pause and limit
-- changes wait for claims in flight and bind every later one), returns nothing for a paused
-- queue, runs the single-statement fast path when the queue has no limits
-- and no keyed job is ready, and otherwise claim_controlled: queue and key concurrency
-- limits, token buckets and per-key ordering, each decided after the lock that serialises
-- it. Either way one implicit transaction, committed at once.
-- Columns: only what a worker needs, in this order (rows::claimed decodes by position); the
-- rest of the row (error history, keys, timestamps) is not sent, which the drain benchmark
-- measured as CPU saved on both sides of the connection.
SELECT id, attempt, max_attempts, queue, kind, args, metadata, priority, run_at, created_at,
       lease_expires_at, released
FROM {{schema}}.claim($1, $2, $3, $4, $5, true, $6, $7, $8)
