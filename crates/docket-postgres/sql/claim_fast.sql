-- claim_fast: the two-branch fast path of the claim, used once some job has waited past the
-- starvation bound (otherwise claim_ready.sql runs). Repeated verbatim inside claim() of
-- migration 0005 (a unit test keeps the two identical), kept here so `docket explain` and
-- the plan test can EXPLAIN it. Only for EXPLAIN: workers call claim.sql.
-- Parameters: $1 text queue, $2 int limit, $3 text owner, $4 bigint lease_ms,
--   $5 bigint starvation bound in ms (NULL: strict priority order).
-- Fairness: jobs ready for longer than the bound are taken first, oldest first (via
--   jobs_age_idx, ties in physical order); the rest of the batch is filled in priority order (jobs_claim_idx). So a
--   job starts at most `bound` after it became ready, plus the time to run the starving jobs
--   that are older than it — however much higher-priority work keeps arriving.
-- Invariants:
--   * One statement, committed at once: no transaction is held while the job runs.
--   * "Ready" is judged by the database clock (run_at <= now()), never the worker's.
--   * FOR UPDATE SKIP LOCKED over the partial indexes (Limit -> LockRows -> Index Scan):
--     concurrent claimers never wait on, nor take, each other's rows. The priority branch
--     only runs when the starving branch did not fill the batch.
--   * attempt + 1 is the new fencing token; every later write must present it.
--   * Pending rows always have attempt < max_attempts (CHECK), so exhausted jobs never match.
--   * Keyed jobs are never taken here (the routing in claim() sends queues with ready keyed
--     jobs to claim_controlled; the filter covers one that arrived since).
WITH starving AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1
      AND run_at <= now() - $5 * interval '1 millisecond'
    ORDER BY run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), by_priority AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1 AND run_at <= now()
      AND id NOT IN (SELECT id FROM starving)
    ORDER BY priority, run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), next AS (
    (SELECT id FROM starving UNION ALL SELECT id FROM by_priority)
    LIMIT $2
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
