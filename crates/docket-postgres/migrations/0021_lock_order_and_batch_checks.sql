-- * heartbeat_fenced() (0016) locks its rows in id order, inside its one statement.
-- * record_steps() (0020) refuses a malformed batch before it writes: arrays of different
--   lengths (unnest() padded the short ones with NULLs, so a call with one id and two
--   names recorded the first name and dropped the second silently) or a NULL element, with
--   SQLSTATE 22023 and the lengths it got. Docket's clients never send one; the function is
--   callable by whoever may claim.
--
-- heartbeat_fenced():
-- Its UPDATE ... FROM unnest() visited the rows in its plan's order, which two heartbeats of
-- one worker need not share: one cut off mid-flight (the worker drops a call that outlives
-- its heartbeat interval, while the server still runs it) and the next, with the same ids.
-- PostgreSQL reported a deadlock between two such heartbeats
-- (conformance::a_call_dropped_at_any_await_leaves_no_transaction_open, 2026-12-05).
--
-- The lock is taken by a subquery of the same UPDATE (ORDER BY id FOR UPDATE), not by a
-- statement before it: the statement's BEFORE triggers and any wait before the scan still
-- happen before a row is locked, so a heartbeat stalled there holds nothing and the next
-- one is not queued behind it (faults.rs, a hanging heartbeat is cut off and retried). The
-- fence is unchanged and is checked on the locked, latest row version.

CREATE OR REPLACE FUNCTION heartbeat_fenced(p_ids bigint[], p_attempts integer[], p_owner text,
    p_lease_ms bigint)
RETURNS TABLE (id bigint, attempt integer, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE sql VOLATILE AS $$
    -- A lease that already expired is not revived (the reaper may be handing the job to
    -- someone else), so the worker must stop.
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
    RETURNING j.id, j.attempt, j.lease_expires_at, j.cancel_requested_at IS NOT NULL
$$;

-- CREATE OR REPLACE keeps the function's grants but not its definer settings.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION heartbeat_fenced(bigint[], integer[], text, bigint) '
        'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;

-- record_steps(): the checks, then the body of migration 0020 unchanged. CREATE OR REPLACE
-- keeps its grants but not its settings: the definer, its path and its generic plan are set
-- again below.
CREATE OR REPLACE FUNCTION record_steps(p_ids bigint[], p_attempts integer[], p_names text[],
    p_outputs jsonb[], p_owner text)
RETURNS TABLE (ord integer, written boolean, output jsonb)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF cardinality(p_ids) IS DISTINCT FROM cardinality(p_attempts)
       OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_names)
       OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_outputs) THEN
        RAISE EXCEPTION 'record_steps: ids, attempts, names and outputs must have the same length (got %, %, %, %)',
            cardinality(p_ids), cardinality(p_attempts), cardinality(p_names), cardinality(p_outputs)
            USING ERRCODE = '22023';
    END IF;
    IF array_position(p_ids, NULL) IS NOT NULL OR array_position(p_attempts, NULL) IS NOT NULL
       OR array_position(p_names, NULL) IS NOT NULL OR array_position(p_outputs, NULL) IS NOT NULL
       OR p_owner IS NULL THEN
        RAISE EXCEPTION 'record_steps: no id, attempt, name, output or owner may be NULL'
            USING ERRCODE = '22023';
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    WITH held AS (
        SELECT j.id, j.attempt
        FROM jobs AS j
        WHERE j.id = ANY(p_ids)
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
        ORDER BY j.id
        FOR UPDATE
    ), ins AS (
        INSERT INTO job_steps AS t (job_id, name, attempt, output)
        SELECT s.id, s.name, s.attempt, s.output
        FROM unnest(p_ids, p_attempts, p_names, p_outputs) AS s(id, attempt, name, output)
        WHERE EXISTS (SELECT 1 FROM held AS h WHERE h.id = s.id AND h.attempt = s.attempt)
        ORDER BY s.id, s.name
        ON CONFLICT (job_id, name) DO NOTHING
        RETURNING t.job_id, t.name
    )
    SELECT s.ord::integer, ins.job_id IS NOT NULL,
           CASE WHEN ins.job_id IS NOT NULL THEN s.output
                ELSE (SELECT r.output FROM job_steps AS r WHERE r.job_id = s.id AND r.name = s.name)
           END
    FROM unnest(p_ids, p_attempts, p_names, p_outputs) WITH ORDINALITY
        AS s(id, attempt, name, output, ord)
    LEFT JOIN ins ON ins.job_id = s.id AND ins.name = s.name
    WHERE EXISTS (SELECT 1 FROM held AS h WHERE h.id = s.id AND h.attempt = s.attempt);
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION record_steps(bigint[], integer[], text[], jsonb[], text) '
        'SECURITY DEFINER SET search_path = %I, pg_temp SET plan_cache_mode = force_generic_plan',
        current_schema());
END
$$;
