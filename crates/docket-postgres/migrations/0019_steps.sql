-- Memoized steps, signals and parks (docs/durable-jobs.md): a named piece of a job's work,
-- recorded once per job under the claim that holds it; signals a job waits for, parked.
--
-- * job_steps: one row per (job, name), the run that recorded it and its output. No foreign
--   key to jobs: a key's check would run on every delete of a job, steps or not, which is
--   the fast path of plain jobs (completion by delete). Steps whose job is gone are deleted
--   by prune_steps() instead, run by the pruner.
-- * record_step(): the fenced write. The job's row is locked (FOR UPDATE) with the fence's
--   check (attempt, owner, unexpired lease on the database clock) in the same statement as
--   the insert, so the reaper cannot take the job between the check and the commit: a stale
--   attempt records nothing. A name already recorded is kept (the first record wins) and its
--   output returned. It commits without waiting for its WAL flush, as a claim does (0011): a
--   record lost in a server crash is a crash before the record — the step runs again, which
--   "at most once as recorded" allows — and every later commit of the job flushes it first.
-- * job_signals: one row per (job, name), kept until pruned with its job. signal() (granted
--   like enqueue) refuses a missing or finished job, keeps the first of a (job, name), and
--   wakes a job parked waiting for it (pending, its wait recorded, no answer yet).
-- * park_fenced(): snooze_fenced() (migration 0016) for a job waiting for a signal, due at
--   once when the signal is already there. It locks the rows first and decides in a second
--   statement (a new snapshot); signal() locks the job's row first too, so whichever of the
--   two comes second sees the other: no wake-up is lost.

CREATE TABLE job_steps (
    job_id bigint NOT NULL,
    name text NOT NULL,
    attempt integer NOT NULL,
    output jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (job_id, name),
    CONSTRAINT job_steps_name_bounded CHECK (octet_length(name) BETWEEN 1 AND 128),
    CONSTRAINT job_steps_output_bounded CHECK (octet_length(output::text) <= 16777216)
);

CREATE TABLE job_signals (
    job_id bigint NOT NULL,
    name text NOT NULL,
    payload jsonb NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (job_id, name),
    CONSTRAINT job_signals_name_bounded CHECK (octet_length(name) BETWEEN 1 AND 128),
    CONSTRAINT job_signals_payload_bounded CHECK (octet_length(payload::text) <= 1048576)
);

CREATE FUNCTION signal(p_id bigint, p_name text, p_payload jsonb)
RETURNS TABLE (new boolean, woke boolean)
LANGUAGE plpgsql VOLATILE AS $$
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
        RAISE EXCEPTION 'job % not found', p_id USING ERRCODE = 'P0002';
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

CREATE FUNCTION park_fenced(p_ids bigint[], p_attempts integer[], p_delays_ms bigint[],
    p_signals text[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
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
      AND j.attempt = s.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION record_step(p_id bigint, p_attempt integer, p_owner text, p_name text,
    p_output jsonb)
RETURNS TABLE (written boolean, output jsonb)
LANGUAGE sql VOLATILE AS $$
    SELECT set_config('synchronous_commit', 'off', true);
    WITH held AS (
        SELECT j.id
        FROM jobs AS j
        WHERE j.id = p_id
      AND j.attempt = p_attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
        FOR UPDATE
    ), ins AS (
        INSERT INTO job_steps (job_id, name, attempt, output)
        SELECT held.id, p_name, p_attempt, p_output FROM held
        ON CONFLICT (job_id, name) DO NOTHING
        RETURNING job_steps.output
    )
    SELECT (SELECT count(*) FROM ins) = 1,
           coalesce((SELECT ins.output FROM ins),
                    (SELECT s.output FROM job_steps AS s WHERE s.job_id = p_id AND s.name = p_name))
    FROM held
$$;

CREATE FUNCTION prune_steps(p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- Steps and signals of jobs that no longer exist (completed by delete, pruned), bounded.
    WITH doomed AS (
        SELECT s.job_id, s.name
        FROM job_steps AS s
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = s.job_id)
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM job_steps AS s USING doomed
        WHERE s.job_id = doomed.job_id AND s.name = doomed.name
        RETURNING 1
    ), doomed_signals AS (
        SELECT g.job_id, g.name
        FROM job_signals AS g
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id)
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone_signals AS (
        DELETE FROM job_signals AS g USING doomed_signals
        WHERE g.job_id = doomed_signals.job_id AND g.name = doomed_signals.name
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_signals)
$$;

-- Definers with a pinned path, granted to whoever may claim (as in migration 0017). The
-- table itself is written only through them.
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'record_step(bigint, integer, text, text, jsonb)',
        'park_fenced(bigint[], integer[], bigint[], text[], text)',
        'signal(bigint, text, jsonb)',
        'prune_steps(bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        FOR writer IN
            SELECT DISTINCT a.grantee::regrole
            FROM pg_proc p, aclexplode(p.proacl) AS a
            WHERE p.oid = 'claim(text, integer, text, bigint, bigint, boolean, integer)'::regprocedure
              AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, writer);
        END LOOP;
    END LOOP;
END
$$;
REVOKE ALL ON job_steps FROM PUBLIC;
REVOKE ALL ON job_signals FROM PUBLIC;
-- Whoever may claim may read the steps (a worker loads a job's steps when it runs it).
DO $$
DECLARE
    writer regrole;
BEGIN
    FOR writer IN
        SELECT DISTINCT a.grantee::regrole
        FROM pg_proc p, aclexplode(p.proacl) AS a
        WHERE p.oid = 'claim(text, integer, text, bigint, bigint, boolean, integer)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT SELECT ON job_steps, job_signals TO %s', writer);
    END LOOP;
END
$$;
