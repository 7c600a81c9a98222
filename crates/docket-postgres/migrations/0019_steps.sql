-- Memoized steps: a named piece of a job's work, recorded once per job under the claim that
-- holds it (docs/durable-jobs.md).
--
-- * job_steps: one row per (job, name), the run that recorded it and its output. No foreign
--   key to jobs: a key's check would run on every delete of a job, steps or not, which is
--   the fast path of plain jobs (completion by delete). Steps whose job is gone are deleted
--   by prune_steps() instead, run by the pruner.
-- * record_step(): the fenced write. The job's row is locked (FOR UPDATE) with the fence's
--   check (attempt, owner, unexpired lease on the database clock) in the same statement as
--   the insert, so the reaper cannot take the job between the check and the commit: a stale
--   attempt records nothing. A name already recorded is kept (the first record wins) and its
--   output returned.

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

CREATE FUNCTION record_step(p_id bigint, p_attempt integer, p_owner text, p_name text,
    p_output jsonb)
RETURNS TABLE (written boolean, output jsonb)
LANGUAGE sql VOLATILE AS $$
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
    -- Steps of jobs that no longer exist (completed by delete, pruned, never kept), bounded.
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
    )
    SELECT count(*) FROM gone
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
        EXECUTE format('GRANT SELECT ON job_steps TO %s', writer);
    END LOOP;
END
$$;
