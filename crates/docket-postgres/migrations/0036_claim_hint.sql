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
-- horizon is held back, and looks behind the hint at least once a second with a read that
-- locks nothing (sql/claim_probe.sql), which also judges the starvation bound (the PostgreSQL
-- engine's claim, crates/docket-postgres/src/scan_hint.rs).
--
-- The fenced writes of a batch (heartbeat, completions, failures, snoozes, parks, progress)
-- join `unnest(p_ids, …)` to jobs. Under the same pin (issue 31's scenario, 2,000 jobs/s)
-- heartbeats of a few hundred leases ran for minutes at full CPU and completions took 100 ms
-- and more (`perf`: index_fetch_heap under a full scan of jobs_pkey), outliving the worker's
-- timeout while the server kept running them, each holding a snapshot of its own. Cause:
-- autoanalyze samples a table whose few live rows sit among hundreds of thousands of dead
-- versions it may not remove, finds none and records reltuples = 0; planned then (an SQL
-- function is planned at every call, a cached plan is replanned after the ANALYZE), an index
-- scan of jobs costs nothing, so the plan walks jobs_pkey whole as the join's outer side —
-- for a heartbeat, because that walk also yields the ORDER BY id its locks need. Reproduced
-- on a table ANALYZEd empty: `EXPLAIN` of the join shows `Index Scan using jobs_pkey` with no
-- index condition. Each of these statements now also says `j.id = ANY (p_ids)` (as
-- record_steps() already did): whatever the statistics, the scan of jobs is the primary key
-- probed for those ids, and nothing else. The functions are restated whole, unchanged but
-- for that line and, as settings of each, sequential and bitmap scans off: with the new
-- condition a small table could otherwise be read in heap order, and the rows' lock order
-- must stay the ids' (the clients send them sorted; migration 0021) whichever side of the
-- join the plan puts jobs on. heartbeat_fenced() becomes PL/pgSQL (its plan cached, as
-- complete_fenced() since migration 0035) with the same settings and the join methods that
-- could reorder it off.
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
        WHERE l.id = ANY (p_ids)
        ORDER BY l.id
        FOR UPDATE OF l
    ) AS c
    WHERE j.id = c.id
      AND j.id = ANY (p_ids)
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

CREATE OR REPLACE FUNCTION complete_delete_fenced(p_ids bigint[], p_attempts integer[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- Completion by delete (WorkerConfig::keep_succeeded = false, the default): the fence of
    -- complete_fenced, unchanged. A keyed job releases its keys through the trigger
    -- jobs_release_keys_on_delete (migration 0013).
    DELETE FROM jobs AS j
    USING unnest(p_ids, p_attempts) AS c(id, attempt)
    WHERE j.id = c.id
      AND j.id = ANY (p_ids)
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$function$;

CREATE OR REPLACE FUNCTION complete_fenced(p_ids bigint[], p_attempts integer[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
-- PL/pgSQL, its plans cached, where migration 0016's writes are SQL functions planned at every
-- call: planning this statement (a delete feeding an aggregate insert into another table)
-- cost ~11 µs a job at the worker's batch sizes of ~30, as much again as the move itself
-- (DO-block harness, 30 a batch: SQL function 50–57 µs a job, cached 38–41, deleting
-- default 36–39). 0016's reason for SQL functions was lock order: a cached generic plan on
-- a small table could lock a batch's rows in heap order while a custom plan locked them in
-- the array's. The settings above leave the generic plan one choice, the array's order —
-- a nested loop over the ids probing the primary key, as every custom plan does.
DECLARE
    v_moved integer;
BEGIN
    -- Plan notes of migration 0016 hold (one primary-key probe per id; the owner test carries
    -- the state). Plain jobs move: deleted, then appended packed, one history row per queue.
    RETURN QUERY
    WITH moved AS (
    DELETE FROM jobs AS j
    USING unnest(p_ids, p_attempts) AS c(id, attempt)
    WHERE j.id = c.id
      AND j.id = ANY (p_ids)
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
      AND j.workflow_id IS NULL
    RETURNING j.*
    ), kept AS (
    INSERT INTO jobs_succeeded (lo, hi, queue, finished_at, n, jobs)
    SELECT min(m.id), max(m.id), m.queue, statement_timestamp(), count(*),
           array_agg(ROW(m.id, m.queue, m.kind, m.args, m.priority, m.run_at, m.attempt,
                         m.max_attempts, m.released, m.cancel_requested_at, m.unique_key,
                         m.ordering_key, m.concurrency_key, m.errors, m.metadata,
                         m.created_at, m.attempted_at, m.progress_percent,
                         m.progress_message, m.progress_at, m.batch_id)::succeeded_job
                     ORDER BY m.id)
    FROM moved AS m
    GROUP BY m.queue
    RETURNING 1
    )
    SELECT m.id, m.attempt FROM moved AS m;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved < cardinality(p_ids) THEN
        -- Ids the move did not take: a workflow node completed here (in its handler's
        -- transaction) keeps its row, updated as before; the rest are lost leases.
        RETURN QUERY
        UPDATE jobs AS j
        SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(),
            lease_owner = NULL, lease_expires_at = NULL
        FROM unnest(p_ids, p_attempts) AS c(id, attempt)
        WHERE j.id = c.id
          AND j.id = ANY (p_ids)
          AND j.attempt = c.attempt
          AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
          AND j.workflow_id IS NOT NULL
        RETURNING j.id, j.attempt;
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION complete_nodes_fenced(p_ids bigint[], p_attempts integer[], p_outputs jsonb[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
DECLARE
    v_done bigint[];
    v_attempts integer[];
    v_woken integer;
BEGIN
    -- The children of the whole batch first, in id order: every transaction that ends
    -- parents takes their shared children in one order.
    PERFORM 1 FROM jobs AS c
    WHERE c.id IN (SELECT d.child_id FROM job_deps AS d
                   WHERE d.parent_id = ANY (p_ids) AND d.state = 'waiting')
    ORDER BY c.id
    FOR UPDATE;
    -- complete_output_fenced()'s fence and write (migration 0018), the output optional. The
    -- batch's edges are consumed below in three statements for the whole batch, rather than
    -- row by row by the trigger, which this setting keeps quiet for this statement only.
    PERFORM set_config('docket.nodes_batch', 'on', true);
    WITH done AS (
        UPDATE jobs AS j
        SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(),
            lease_owner = NULL, lease_expires_at = NULL, output = c.output
        FROM unnest(p_ids, p_attempts, p_outputs) AS c(id, attempt, output)
        WHERE j.id = c.id
          AND j.id = ANY (p_ids)
          AND j.attempt = c.attempt
          AND coalesce(TRUE
          AND j.lease_owner = p_owner
          AND j.lease_expires_at > statement_timestamp(), false)
        RETURNING j.id, j.attempt
    )
    SELECT coalesce(array_agg(d.id), '{}'), coalesce(array_agg(d.attempt), '{}')
    INTO v_done, v_attempts FROM done AS d;
    PERFORM set_config('docket.nodes_batch', 'off', true);
    PERFORM pg_notify(current_schema() || '_done', x::text) FROM unnest(v_done) AS x;
    -- workflow_resolve() for a success, set-based: each edge of a node that succeeded here
    -- and is still waiting is consumed once; a child whose count reaches zero is pending,
    -- due now, and its queue's workers are woken at commit.
    WITH consumed AS (
        UPDATE job_deps AS d SET state = 'satisfied'
        WHERE d.parent_id = ANY (v_done) AND d.state = 'waiting'
        RETURNING d.child_id
    ), counts AS (
        SELECT child_id, count(*)::integer AS n FROM consumed GROUP BY child_id
    ), ready AS (
        UPDATE jobs AS c
        SET state = CASE WHEN c.deps_waiting = k.n THEN 'pending' ELSE c.state END,
            run_at = CASE WHEN c.deps_waiting = k.n THEN now() ELSE c.run_at END,
            deps_waiting = c.deps_waiting - k.n
        FROM counts AS k
        WHERE c.id = k.child_id AND c.state = 'waiting'
        RETURNING c.state, c.queue
    )
    SELECT count(*) INTO v_woken
    FROM (SELECT pg_notify(current_schema() || '_wakeup', r.queue)
          FROM (SELECT DISTINCT queue FROM ready WHERE state = 'pending') AS r) AS w;
    RETURN QUERY SELECT x.id, x.attempt FROM unnest(v_done, v_attempts) AS x(id, attempt);
END
$function$;

CREATE OR REPLACE FUNCTION complete_output_fenced(p_ids bigint[], p_attempts integer[], p_outputs jsonb[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- complete_fenced() (migration 0016) with the output: the same plan notes and fence.
    WITH done AS (
    UPDATE jobs AS j
    SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(),
        lease_owner = NULL, lease_expires_at = NULL, output = c.output
    FROM unnest(p_ids, p_attempts, p_outputs) AS c(id, attempt, output)
    WHERE j.id = c.id
      AND j.id = ANY (p_ids)
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
    )
    SELECT d.id, d.attempt
    FROM done AS d
    CROSS JOIN LATERAL (SELECT pg_notify(current_schema() || '_done', d.id::text)) AS n
$function$;

CREATE OR REPLACE FUNCTION fail_fenced(p_ids bigint[], p_attempts integer[], p_classes text[], p_messages text[], p_delays_ms bigint[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- cancel, or any failure of a job an operator asked to cancel -> cancelled; discard, or
    -- retry with attempt >= max_attempts -> dead; retry otherwise -> pending at now() +
    -- delay (backoff grows with the recorded failures, not with attempt). Every failure
    -- appends to the bounded history. A class other than the three writes nothing.
    UPDATE jobs AS j
    SET attempt = f.attempt,
        state = CASE
            WHEN f.class = 'cancel' OR j.cancel_requested_at IS NOT NULL THEN 'cancelled'
            WHEN f.class = 'discard' OR j.attempt >= j.max_attempts THEN 'dead'
            ELSE 'pending' END,
        run_at = CASE
            WHEN f.class = 'retry' AND j.attempt < j.max_attempts AND j.cancel_requested_at IS NULL
            THEN now() + coalesce(f.delay_ms * interval '1 millisecond',
                                  backoff_delay(jsonb_array_length(j.errors) + 1,
                                                j.backoff_base_ms, j.backoff_cap_ms))
            ELSE j.run_at END,
        finished_at = CASE
            WHEN f.class = 'retry' AND j.attempt < j.max_attempts AND j.cancel_requested_at IS NULL
            THEN NULL
            ELSE now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        errors = push_error(j.errors, jsonb_build_object(
            'attempt', j.attempt - j.released, 'at', now(), 'class', f.class,
            'message', left(f.message, 4096), 'owner', p_owner))
    FROM unnest(p_ids, p_attempts, p_classes, p_messages, p_delays_ms)
         AS f(id, attempt, class, message, delay_ms)
    WHERE j.id = f.id
      AND j.id = ANY (p_ids)
      AND f.class IN ('retry', 'discard', 'cancel')
      AND j.attempt = f.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$function$;

CREATE OR REPLACE FUNCTION park_fenced(p_ids bigint[], p_attempts integer[], p_delays_ms bigint[], p_signals text[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- The rows first, in id order: a signal() that holds one commits before the next
    -- statement's snapshot, which then sees its signal.
    SELECT 1 FROM jobs AS j WHERE j.id = ANY(p_ids) ORDER BY j.id FOR UPDATE;
    UPDATE jobs AS j
    SET attempt = s.attempt,
        state = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        run_at = now() + CASE
            WHEN EXISTS (SELECT 1 FROM job_signals AS g WHERE g.job_id = j.id AND g.name = s.signal)
            THEN 0 ELSE greatest(s.delay_ms, 0) END * interval '1 millisecond',
        max_attempts = j.max_attempts + 1,
        released = j.released + 1,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM unnest(p_ids, p_attempts, p_delays_ms, p_signals) AS s(id, attempt, delay_ms, signal)
    WHERE j.id = s.id
      AND j.id = ANY (p_ids)
      AND j.attempt = s.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$function$;

CREATE OR REPLACE FUNCTION progress_fenced(p_ids bigint[], p_attempts integer[], p_percents real[], p_messages text[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- heartbeat_fenced()'s fence (migration 0016), without extending the lease. Committed
    -- without waiting for its WAL flush: a report lost in a crash is replaced by the next.
    SELECT set_config('synchronous_commit', 'off', true);
    UPDATE jobs AS j
    SET attempt = c.attempt, progress_percent = c.percent, progress_message = c.message,
        progress_at = statement_timestamp()
    FROM unnest(p_ids, p_attempts, p_percents, p_messages) AS c(id, attempt, percent, message)
    WHERE j.id = c.id
      AND j.id = ANY (p_ids)
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$function$;

CREATE OR REPLACE FUNCTION snooze_fenced(p_ids bigint[], p_attempts integer[], p_delays_ms bigint[], p_owner text)
 RETURNS TABLE(id bigint, attempt integer)
 LANGUAGE sql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET search_path FROM CURRENT
AS $function$
    -- Back to pending after a delay without using the retry budget (also the release of
    -- buffered jobs, delay 0): attempt, the fencing token, never goes down, so the budget is
    -- given back by raising max_attempts, and `released` counts a claim that did not run.
    -- A job an operator asked to cancel is cancelled instead.
    UPDATE jobs AS j
    SET attempt = s.attempt,
        state = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        run_at = now() + greatest(s.delay_ms, 0) * interval '1 millisecond',
        max_attempts = j.max_attempts + 1,
        released = j.released + 1,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM unnest(p_ids, p_attempts, p_delays_ms) AS s(id, attempt, delay_ms)
    WHERE j.id = s.id
      AND j.id = ANY (p_ids)
      AND j.attempt = s.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$function$;

-- CREATE OR REPLACE keeps the functions' grants but not their definer settings' path.
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'complete_delete_fenced(bigint[], integer[], text)',
        'complete_fenced(bigint[], integer[], text)',
        'complete_nodes_fenced(bigint[], integer[], jsonb[], text)',
        'complete_output_fenced(bigint[], integer[], jsonb[], text)',
        'fail_fenced(bigint[], integer[], text[], text[], bigint[], text)',
        'park_fenced(bigint[], integer[], bigint[], text[], text)',
        'progress_fenced(bigint[], integer[], real[], text[], text)',
        'snooze_fenced(bigint[], integer[], bigint[], text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;

-- The function is dropped and created (its arguments change): its SECURITY DEFINER, pinned
-- search_path, plan mode and every EXECUTE grant are carried over, so roles granted before
-- this migration keep claiming (later migrations find the worker role by that grant). It
-- also plans without bitmap scans: under the pin, statistics taken from a table of dead
-- versions (reltuples 0) made the hinted path's generic plan a bitmap scan of jobs_age_idx
-- (every ready-or-dead entry of the queue) and a sort, measured as claims of 25–35 ms again
-- after the first minute of hinting; without bitmap scans it is jobs_claim_idx from the
-- position, as written, whatever the statistics (checked with EXPLAIN on that cluster).

ALTER FUNCTION claim(text, integer, text, bigint, bigint, boolean, integer) RENAME TO claim_0035;

CREATE FUNCTION claim(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint, p_starve_ms bigint,
                      p_async boolean DEFAULT false, p_controlled integer DEFAULT NULL,
                      p_from_priority smallint DEFAULT NULL, p_from_run_at timestamptz DEFAULT NULL)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_bitmapscan = off
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
