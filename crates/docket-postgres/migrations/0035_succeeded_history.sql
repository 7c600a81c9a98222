-- Migration 0035: a kept success leaves the hot table for a packed, append-only history.
--
-- Why: keeping succeeded jobs (WorkerConfig::keep_succeeded) was an UPDATE to 'succeeded' —
-- a new copy of the whole row and an entry in the primary key and in jobs_finished_idx —
-- where the default's success is a DELETE that only stamps the old version. Measured on
-- Docket's own functions (a DO block claiming 100 and completing them, 20,000 jobs with
-- distinct ~90-byte args, nine runs each): WAL 836 B a job deleted, 1,281 kept by update;
-- backend CPU (median) 31 µs deleted, 45 µs kept. A move into a table of its own (one row a
-- job, an id index) wrote 1,024 B: the cost is the copy and its index entry, not where it
-- goes. So the completion now DELETEs the rows and appends them **packed**: one history row
-- per completing statement and queue, holding the jobs as an array of `succeeded_job`
-- (compressed as one value by TOAST, no tuple header or index entry a job). Same harness:
-- 899 B and 31–37 µs a job, within 10 % of the deleting default (at 30 a batch, with the
-- plan cached as below: 866 B and 38–41 µs against 792 B and 36–39 µs).
--
-- What does not change: the fence (id + attempt + owner + unexpired lease, judged when
-- written: a stale attempt moves nothing), the triggers a deleted running row fires (keys
-- released, a batch's tally counts it succeeded), the per-key order (the next keyed job is
-- free once its predecessor left `jobs`). Workflow nodes keep their row in `jobs` (their
-- graph and outputs are read from there): complete_fenced() updates them as before. Jobs
-- with an output keep theirs too (complete_output_fenced(), unchanged). Rows kept by the
-- old completion stay in `jobs` and are read and pruned where they are.
--
-- Reading: get.sql, list.sql, search_finished.sql (state succeeded) and stats_queues.sql
-- read both places; a job is found by id through the GiST index on each history row's id
-- range (the jobs of one completion were claimed together: the ranges are narrow). The
-- retention's prune deletes whole history rows by finished_at (prune_finished()); a kept
-- success's steps and signals stay as long as it does (prune_steps()); signal() refuses it
-- as succeeded.
--
-- `succeeded_job` is a type of its own rather than `jobs`' row type, so a later column
-- added to `jobs` (with a default) is not refused for the history's sake.

CREATE TYPE succeeded_job AS (
    id bigint,
    queue text,
    kind text,
    args jsonb,
    priority smallint,
    run_at timestamptz,
    attempt integer,
    max_attempts integer,
    released integer,
    cancel_requested_at timestamptz,
    unique_key text,
    ordering_key text,
    concurrency_key text,
    errors jsonb,
    metadata jsonb,
    created_at timestamptz,
    attempted_at timestamptz,
    progress_percent real,
    progress_message text,
    progress_at timestamptz,
    batch_id bigint
);

CREATE TABLE jobs_succeeded (
    lo bigint NOT NULL,
    hi bigint NOT NULL,
    queue text NOT NULL,
    finished_at timestamptz NOT NULL,
    n integer NOT NULL,
    jobs succeeded_job[] NOT NULL,
    CHECK (lo <= hi AND n = cardinality(jobs))
);
CREATE INDEX jobs_succeeded_ids ON jobs_succeeded USING gist (int8range(lo, hi, '[]'));
CREATE INDEX jobs_succeeded_finished ON jobs_succeeded (finished_at);

-- One kept success by id: the one place that knows how to find it (the GiST index on each
-- history row's id range, then the array). get.sql, output.sql, lease_status.sql,
-- search_finished.sql's cursor and prune_steps() call it.
CREATE FUNCTION kept_job(p_id bigint)
RETURNS TABLE (job succeeded_job, finished_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r, h.finished_at
    FROM jobs_succeeded AS h, unnest(h.jobs) AS r
    WHERE int8range(h.lo, h.hi, '[]') @> p_id
      AND r.id = p_id
    LIMIT 1
$$;

-- Every job, live or kept, in the columns of `jobs`: for an operator's ad-hoc SQL (and the
-- tests). Docket's own reads go to each table by its index (a filter on id is not pushed
-- into the history's arrays through this view).
CREATE VIEW jobs_all AS
SELECT id, queue, kind, args, state, priority, run_at, attempt, max_attempts, lease_owner,
       lease_expires_at, cancel_requested_at, unique_key, errors, metadata, backoff_base_ms,
       backoff_cap_ms, created_at, attempted_at, finished_at, ordering_key, concurrency_key,
       blocked, released, output, progress_percent, progress_message, progress_at,
       workflow_id, node, deps_waiting, batch_id
FROM jobs
UNION ALL
SELECT r.id, r.queue, r.kind, r.args, 'succeeded', r.priority, r.run_at, r.attempt,
       r.max_attempts, NULL, NULL, r.cancel_requested_at, r.unique_key, r.errors, r.metadata,
       NULL, NULL, r.created_at, r.attempted_at, h.finished_at, r.ordering_key,
       r.concurrency_key, false, r.released, NULL, r.progress_percent, r.progress_message,
       r.progress_at, NULL, NULL, NULL, r.batch_id
FROM jobs_succeeded AS h, unnest(h.jobs) AS r;

CREATE OR REPLACE FUNCTION complete_fenced(p_ids bigint[], p_attempts integer[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE plpgsql VOLATILE
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $$
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
          AND j.attempt = c.attempt
          AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
          AND j.workflow_id IS NOT NULL
        RETURNING j.id, j.attempt;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION prune_finished(p_states text[], p_retention_ms bigint, p_outputs_ms bigint,
    p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- Migration 0018's prune of `jobs`, and, for 'succeeded', whole history rows past the
    -- retention (at most p_batch jobs' worth a call, at least one row). Returns the jobs gone.
    WITH doomed AS (
        SELECT d.id
        FROM jobs AS d
        WHERE d.state = ANY(p_states)
          AND d.state IN ('succeeded', 'dead', 'cancelled')
          AND d.finished_at IS NOT NULL
          AND d.finished_at < now() - p_retention_ms * interval '1 millisecond'
          AND (d.output IS NULL
               OR d.finished_at < now() - p_outputs_ms * interval '1 millisecond')
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM jobs AS j USING doomed WHERE j.id = doomed.id RETURNING 1
    ), old_history AS (
        SELECT h.ctid AS t, sum(h.n) OVER (ORDER BY h.finished_at) AS upto
        FROM jobs_succeeded AS h
        WHERE 'succeeded' = ANY(p_states)
          AND h.finished_at < now() - p_retention_ms * interval '1 millisecond'
        ORDER BY h.finished_at
        LIMIT greatest(p_batch, 0)
    ), history_gone AS (
        DELETE FROM jobs_succeeded AS h
        WHERE h.ctid = ANY (ARRAY(SELECT o.t FROM old_history AS o
                                  WHERE o.upto <= greatest(p_batch, 1)
                                     OR o.upto = (SELECT min(upto) FROM old_history)))
          AND h.finished_at < now() - p_retention_ms * interval '1 millisecond'
        RETURNING h.n
    )
    SELECT (SELECT count(*) FROM gone) + coalesce((SELECT sum(n) FROM history_gone), 0)
$$;

-- Migration 0019's signal(), and a kept success is refused as succeeded (55000, the state as
-- DETAIL), as it was while its row stayed in `jobs`, not reported missing.
CREATE OR REPLACE FUNCTION signal(p_id bigint, p_name text, p_payload jsonb)
RETURNS TABLE (new boolean, woke boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
    v_queue text;
    v_new integer;
    v_woke integer;
BEGIN
    IF p_name IS NULL OR octet_length(p_name) NOT BETWEEN 1 AND 128 OR p_name ~ '[[:cntrl:]]'
       OR p_name LIKE 'docket:%' THEN
        RAISE EXCEPTION 'invalid signal name: 1 to 128 bytes, no control characters, not docket:...'
            USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL OR octet_length(p_payload::text) > 1048576 THEN
        RAISE EXCEPTION 'invalid signal payload: JSON of at most 1048576 bytes' USING ERRCODE = '22023';
    END IF;
    SELECT j.state, j.queue INTO v_state, v_queue FROM jobs AS j WHERE j.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM kept_job(p_id)) THEN
            v_state := 'succeeded';
        ELSE
            RAISE EXCEPTION 'job % not found', p_id USING ERRCODE = 'P0002';
        END IF;
    END IF;
    IF v_state IN ('succeeded', 'dead', 'cancelled') THEN
        RAISE EXCEPTION 'job % is %: a signal is refused', p_id, v_state
            USING ERRCODE = '55000', DETAIL = v_state;
    END IF;
    INSERT INTO job_signals (job_id, name, payload) VALUES (p_id, p_name, p_payload)
    ON CONFLICT (job_id, name) DO NOTHING;
    GET DIAGNOSTICS v_new = ROW_COUNT;
    UPDATE jobs AS j SET run_at = now()
    WHERE j.id = p_id AND j.state = 'pending' AND j.run_at > now()
      AND EXISTS (SELECT 1 FROM job_steps AS s WHERE s.job_id = p_id AND s.name = 'docket:wait:' || p_name)
      AND NOT EXISTS (SELECT 1 FROM job_steps AS s WHERE s.job_id = p_id AND s.name = 'docket:signal:' || p_name);
    GET DIAGNOSTICS v_woke = ROW_COUNT;
    IF v_woke > 0 THEN
        PERFORM pg_notify(current_schema() || '_wakeup', v_queue);
    END IF;
    RETURN QUERY SELECT v_new = 1, v_woke = 1;
END
$$;

CREATE OR REPLACE FUNCTION prune_steps(p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- Steps and signals of jobs that no longer exist (completed by delete, pruned), bounded;
    -- a kept success's stay while its history row does.
    WITH doomed AS (
        SELECT s.job_id, s.name
        FROM job_steps AS s
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = s.job_id)
          AND NOT EXISTS (SELECT 1 FROM kept_job(s.job_id))
        LIMIT greatest(p_batch, 0)
        FOR UPDATE OF s SKIP LOCKED
    ), gone AS (
        DELETE FROM job_steps AS s USING doomed
        WHERE s.job_id = doomed.job_id AND s.name = doomed.name
        RETURNING 1
    ), doomed_signals AS (
        SELECT g.job_id, g.name
        FROM job_signals AS g
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id)
          AND NOT EXISTS (SELECT 1 FROM kept_job(g.job_id))
        LIMIT greatest(p_batch, 0)
        FOR UPDATE OF g SKIP LOCKED
    ), gone_signals AS (
        DELETE FROM job_signals AS g USING doomed_signals
        WHERE g.job_id = doomed_signals.job_id AND g.name = doomed_signals.name
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_signals)
$$;

DO $$
DECLARE
    f text;
    reader regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'complete_fenced(bigint[], integer[], text)',
        'prune_finished(text[], bigint, bigint, bigint)',
        'prune_steps(bigint)',
        'signal(bigint, text, jsonb)',
        'kept_job(bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
    -- A reader, but a definer: nobody without a grant reads kept jobs through it.
    REVOKE EXECUTE ON FUNCTION kept_job(bigint) FROM PUBLIC;
    -- Whoever may read jobs (the worker and operator roles of `docket grant`) reads their
    -- history; writes stay with the definer functions above (`docket grant` revokes them).
    FOR reader IN
        SELECT DISTINCT a.grantee::regrole
        FROM pg_class c, aclexplode(c.relacl) AS a
        WHERE c.oid = 'jobs'::regclass AND a.privilege_type = 'SELECT' AND a.grantee <> 0
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON jobs_succeeded, jobs_all TO %s', reader);
        EXECUTE format('GRANT EXECUTE ON FUNCTION kept_job(bigint) TO %s', reader);
    END LOOP;
END
$$;
