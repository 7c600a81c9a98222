-- claim_ready: the fast path of the claim when no job is starving (the common case): ready
-- jobs by priority. Repeated verbatim inside claim() of migration 0005 (a test keeps the two
-- identical), kept here so `docket explain` can show its plan. Only for EXPLAIN.
-- Parameters: $1 text queue, $2 int limit, $3 text owner, $4 bigint lease_ms.
-- Invariants: as claim_fast.sql — one statement committed at once, database clock, FOR UPDATE
--   SKIP LOCKED over jobs_claim_idx (Limit -> LockRows -> Index Scan), attempt + 1 as the
--   fencing token, keyed jobs never taken here. The update probes the primary key with
--   `= ANY (ARRAY(...))` so even a generic plan cannot turn it into a hash join over the table.
WITH next AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1 AND run_at <= now()
    ORDER BY priority, run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond',
    attempted_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM next))
  AND j.ordering_key IS NULL AND j.concurrency_key IS NULL
RETURNING j.*
