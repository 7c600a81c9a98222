-- claim: hand up to $2 ready jobs of queue $1 to owner $3 with a lease of $4 ms.
-- Parameters: $1 text queue, $2 int limit, $3 text owner, $4 bigint lease_ms.
-- Invariants:
--   * One statement, committed at once: no transaction is held while the job runs.
--   * "Ready" is judged by the database clock (run_at <= now()), never the worker's.
--   * FOR UPDATE SKIP LOCKED over jobs_claim_idx (Limit -> LockRows -> Index Scan): concurrent
--     claimers never wait on, nor take, each other's rows.
--   * attempt + 1 is the new fencing token; every later write must present it.
--   * Pending rows always have attempt < max_attempts (CHECK), so exhausted jobs never match.
WITH next AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'pending' AND queue = $1 AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond',
    attempted_at = now()
FROM next
WHERE j.id = next.id
RETURNING j.id, j.attempt, j.max_attempts, j.queue, j.kind, j.args, j.metadata, j.priority,
          j.run_at, j.created_at, j.lease_expires_at
