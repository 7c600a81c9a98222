-- Migration 0036: a claim may start its scan where the worker's previous claim began, so a
-- long transaction that pins the vacuum horizon no longer makes every claim walk every job
-- consumed since that transaction began.
--
-- Why: a claim's scan of jobs_claim_idx (and the starvation check's of jobs_age_idx) starts
-- at the queue's first entry. Each claimed job leaves its pending version's entry there, dead
-- but not removable while any snapshot older than its death is open (a report, pg_dump, a
-- connection idle in a transaction, a standby's feedback): the scan visits each such entry's
-- heap tuple to find it invisible. At 2,000 jobs/s that is 120,000 more entries a minute,
-- walked by every claim, twice (issue 31: pickup p99 76 s at the end of a ten-minute pin).
--
-- claim() gains two optional arguments, p_from_priority and p_from_run_at: a position in
-- claim order (priority, run_at) before which the caller knows nothing it may take is left
-- (the least position its previous claim took; every entry before it was consumed, or
-- locked by another claim, when that claim scanned). With them, a plain queue's claim runs
-- the hinted path: the same statement as the ready path with the row comparison
-- `(priority, run_at) >= (p_from_priority, p_from_run_at)`, which jobs_claim_idx uses as the
-- start of its range, so the dead entries before it are never visited. Without them (NULL,
-- the defaults; every SQL caller of the seven-argument form) the claim is exactly the one
-- before. Queues with limits or keyed jobs ready ignore the hint (claim_controlled()).
--
-- A hint can miss a job that became ready before its position after it was taken: a higher
-- priority, a run_at in the past (a long enqueue transaction, an explicit time), a claim
-- rolled back. The caller therefore hints only while unhinted claims are slow and the
-- horizon is held back, and still runs an unhinted claim at least once a second (the
-- PostgreSQL engine's claim, crates/docket-postgres/src/scan_hint.rs); those decide the
-- starvation bound too.
--
-- heartbeat_fenced() becomes PL/pgSQL with its plan's choices pinned, as complete_fenced() in
-- migration 0035. Under the same pin (issue 31's scenario, 2,000 jobs/s) heartbeats of a
-- few hundred leases ran for minutes at full CPU (`perf`: index_fetch_heap under the SQL
-- function's scans), outliving the worker's timeout (the server kept running them, each
-- holding a snapshot of its own): as an SQL function it was planned at every call, and the
-- statistics of a table whose live rows are few among hundreds of thousands of dead
-- versions (autoanalyze then records reltuples 0) let the planner cost any index as cheap.
-- With hash and merge joins, sequential and bitmap scans off, the plan left is the one the
-- statement was written for: a nested loop over the ids probing the primary key, rows locked
-- in id order (migration 0021), the fence checked on the locked version.
CREATE OR REPLACE FUNCTION heartbeat_fenced(p_ids bigint[], p_attempts integer[], p_owner text,
    p_lease_ms bigint)
RETURNS TABLE (id bigint, attempt integer, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE plpgsql VOLATILE
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off
SET enable_bitmapscan = off AS $$
BEGIN
    -- A lease that already expired is not revived (the reaper may be handing the job to
    -- someone else), so the worker must stop.
    RETURN QUERY
    UPDATE jobs AS j
    SET attempt = c.attempt, lease_owner = p_owner,
        lease_expires_at = now() + greatest(p_lease_ms, 1) * interval '1 millisecond'
    FROM (
        SELECT l.id, u.attempt
        FROM unnest(p_ids, p_attempts) AS u(id, attempt)
        JOIN jobs AS l ON l.id = u.id
        ORDER BY l.id
        FOR UPDATE OF l
    ) AS c
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt, j.lease_expires_at, j.cancel_requested_at IS NOT NULL;
END
$$;

-- CREATE OR REPLACE keeps the function's grants but not its definer settings.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION heartbeat_fenced(bigint[], integer[], text, bigint) '
        'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;

-- The function is dropped and created (its arguments change): its SECURITY DEFINER, pinned
-- search_path, plan mode and every EXECUTE grant are carried over, so roles granted before
-- this migration keep claiming (later migrations find the worker role by that grant).

ALTER FUNCTION claim(text, integer, text, bigint, bigint, boolean, integer) RENAME TO claim_0035;

CREATE FUNCTION claim(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint, p_starve_ms bigint,
                      p_async boolean DEFAULT false, p_controlled integer DEFAULT NULL,
                      p_from_priority smallint DEFAULT NULL, p_from_run_at timestamptz DEFAULT NULL)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $function$
DECLARE
    q queues%ROWTYPE;
BEGIN
    IF p_limit <= 0 THEN RETURN; END IF;
    -- The worker's claim (p_async, sql/claim.sql) is its own transaction and commits without
    -- waiting for the WAL flush (see the header). Off by default: a caller's transaction
    -- that claims keeps its durability.
    IF p_async AND coalesce(current_setting('docket.durable_claims', true), '') NOT IN ('on', 'true') THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    -- Not a wait: see lock_briefly(). Held by a pause or limit change in progress (or by any
    -- connection that took the computable key): this claim hands out nothing.
    IF NOT lock_briefly(lock_space('queue'), hashtext(p_queue), true, 50) THEN RETURN; END IF;
    SELECT * INTO q FROM queues WHERE name = p_queue;
    IF FOUND AND q.paused_at IS NOT NULL THEN RETURN; END IF;
    IF (NOT FOUND OR (q.max_running IS NULL AND q.rate_limit IS NULL))
       AND NOT EXISTS (SELECT 1 FROM jobs
                       WHERE state = 'pending' AND NOT blocked AND queue = p_queue AND run_at <= now()
                         AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL)) THEN
        IF p_from_run_at IS NOT NULL AND p_from_priority IS NOT NULL THEN
            -- The caller's hint: no job it may take sits before (p_from_priority,
            -- p_from_run_at) in claim order — the first position its last claim took. The
            -- scan starts there (a row comparison on jobs_claim_idx's columns: the index
            -- descent skips what lies before it) instead of walking every entry of jobs
            -- consumed since the oldest snapshot still open. Starvation is decided by the
            -- unhinted claims the caller still runs (see the header).
            RETURN QUERY
-- hinted path begin
WITH next AS (
    SELECT id
    FROM jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1 AND run_at <= now()
      AND (priority, run_at) >= ($8, $9)
    ORDER BY priority, run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond',
    attempted_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM next))
  AND j.ordering_key IS NULL AND j.concurrency_key IS NULL
RETURNING j.*
-- hinted path end
            ;
            RETURN;
        END IF;
        -- The oldest ready job's age decides the path. Written as ORDER BY ... LIMIT 1 (not
        -- EXISTS with the bound in the WHERE): a generic plan of the EXISTS form was a
        -- sequential scan of the table (measured: 29 ms a claim at 200,000 rows); this form
        -- is the first entry of jobs_age_idx in every plan.
        IF p_starve_ms IS NULL OR coalesce(
               (SELECT run_at FROM jobs
                WHERE state = 'pending' AND NOT blocked AND queue = p_queue
                ORDER BY run_at LIMIT 1) > now() - p_starve_ms * interval '1 millisecond',
               true) THEN
            RETURN QUERY
-- ready path begin
WITH next AS (
    SELECT id
    FROM jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1 AND run_at <= now()
    ORDER BY priority, run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond',
    attempted_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM next))
  AND j.ordering_key IS NULL AND j.concurrency_key IS NULL
RETURNING j.*
-- ready path end
            ;
            RETURN;
        END IF;
        RETURN QUERY
-- fast path begin
WITH starving AS (
    SELECT id
    FROM jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1
      AND run_at <= now() - $5 * interval '1 millisecond'
    ORDER BY run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), by_priority AS (
    SELECT id
    FROM jobs
    WHERE state = 'pending' AND NOT blocked AND queue = $1 AND run_at <= now()
      AND id NOT IN (SELECT id FROM starving)
    ORDER BY priority, run_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), next AS (
    (SELECT id FROM starving UNION ALL SELECT id FROM by_priority)
    LIMIT $2
)
UPDATE jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond',
    attempted_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM next))
  AND j.ordering_key IS NULL AND j.concurrency_key IS NULL
RETURNING j.*
-- fast path end
        ;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM claim_controlled(p_queue, p_limit, p_owner, p_lease_ms, p_starve_ms, p_controlled);
END
$function$;

DO $$
DECLARE
    grantee regrole;
BEGIN
    EXECUTE format('ALTER FUNCTION claim(text, integer, text, bigint, bigint, boolean, integer, smallint, timestamptz) SET search_path = %I, pg_temp', current_schema());
    EXECUTE 'REVOKE EXECUTE ON FUNCTION claim(text, integer, text, bigint, bigint, boolean, integer, smallint, timestamptz) FROM PUBLIC';
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole
        FROM pg_proc p, aclexplode(p.proacl) AS a
        WHERE p.oid = 'claim_0035(text, integer, text, bigint, bigint, boolean, integer)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION claim(text, integer, text, bigint, bigint, boolean, integer, smallint, timestamptz) TO %s', grantee);
    END LOOP;
END
$$;

DROP FUNCTION claim_0035(text, integer, text, bigint, bigint, boolean, integer);
