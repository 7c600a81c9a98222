-- Docket migration 0016: job rows are written only through the queue's own functions.
--
-- The worker role (`docket grant`) had INSERT, UPDATE and DELETE on `jobs`, because the
-- runtime's writes were plain statements. A member of it could mark a job it never claimed
-- succeeded, insert a finished row, or delete history: the fence (attempt, owner, lease)
-- only bound the runtime's own statements. Now every write of a job row is one of the
-- functions below (or claim(), unblock_keys(), enqueue_jobs()), SECURITY DEFINER with a
-- pinned search_path, and `docket grant` revokes the worker's DML on `jobs`. Each function
-- is one transition of the state machine with its guard:
-- * complete_fenced / complete_delete_fenced / fail_fenced / snooze_fenced /
--   heartbeat_fenced: only a running job whose attempt, owner and unexpired lease
--   (statement_timestamp(), the database clock) match the caller's claim;
-- * reap_expired: only leases that have expired; prune_finished: only terminal rows past
--   the given retention;
-- * cancel_job, retry_job, run_job_now, skip_job: an operator's single-job controls, each
--   from the states its rule allows.
-- So whoever holds the worker role can run jobs (claim and finish them) and use the
-- controls, but cannot put a row into a state the state machine does not reach, nor skip
-- the history a failure appends.
--
-- The bodies are the statements that were in sql/*.sql (those files now call these), with
-- their plan notes. A function call adds no round trip: still one per batch.
--
-- SQL functions, not PL/pgSQL: a SQL function's statement is planned at every call with
-- the arguments' values, as the client's statement was. PL/pgSQL caches a plan per
-- connection and switches to a generic one after five calls; on a small table the two
-- plans lock a batch's rows in different orders (the array's, or the heap's — and heap
-- order differs between statements whose snapshots saw different row versions), so two
-- connections in different phases deadlocked on the same leases
-- (conformance::a_call_dropped_at_any_await_leaves_no_transaction_open, one run in four).
-- Pinning the PL/pgSQL plan with planner settings avoided that but cost 15-20 % of a
-- no-op drain (docs/benchmarks.md, 2026-12-05).

-- Every function here starts without EXECUTE for PUBLIC (they are definers); the roles that
-- could write `jobs` before this migration (by a grant on the table) are given EXECUTE, so
-- an upgraded deployment keeps working before `docket grant` is re-run. Re-running it then
-- takes the table privileges away.
--
-- Also here: a number in args or metadata that PostgreSQL would store as more than 1,024
-- characters is refused on every insert path (31 bytes of `{"x":1e131000}` read back as
-- 131 KB; the client refuses it too, the rule now also binds the SQL enqueue functions and
-- any direct INSERT).

CREATE FUNCTION complete_fenced(p_ids bigint[], p_attempts integer[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
    -- Plan: one primary-key probe per id. Mentioning state = 'running' here would let the
    -- planner scan jobs_lease_idx (every running lease plus its dead entries) and hash-join
    -- it instead, which measured 8x slower per row under load; the owner test carries it
    -- (CHECK jobs_running_has_lease). coalesce( …, false) keeps the planner from estimating
    -- the owner test from column statistics (analysed while nothing ran, they say no row has
    -- an owner, and a custom plan scanned the whole table once per id).
    -- `attempt = c.attempt` is a no-op while the fence holds and makes a write that slipped
    -- past a broken fence visible to the invariant checker's audit trigger.
    UPDATE jobs AS j
    SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(),
        lease_owner = NULL, lease_expires_at = NULL
    FROM unnest(p_ids, p_attempts) AS c(id, attempt)
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION complete_delete_fenced(p_ids bigint[], p_attempts integer[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
    -- Completion by delete (WorkerConfig::keep_succeeded = false, the default): the fence of
    -- complete_fenced, unchanged. A keyed job releases its keys through the trigger
    -- jobs_release_keys_on_delete (migration 0013).
    DELETE FROM jobs AS j
    USING unnest(p_ids, p_attempts) AS c(id, attempt)
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION fail_fenced(p_ids bigint[], p_attempts integer[], p_classes text[],
    p_messages text[], p_delays_ms bigint[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
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
      AND f.class IN ('retry', 'discard', 'cancel')
      AND j.attempt = f.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION snooze_fenced(p_ids bigint[], p_attempts integer[], p_delays_ms bigint[],
    p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
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
      AND j.attempt = s.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION heartbeat_fenced(p_ids bigint[], p_attempts integer[], p_owner text,
    p_lease_ms bigint)
RETURNS TABLE (id bigint, attempt integer, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE sql VOLATILE AS $$
    -- A lease that already expired is not revived (the reaper may be handing the job to
    -- someone else), so the worker must stop.
    UPDATE jobs AS j
    SET attempt = c.attempt, lease_owner = p_owner,
        lease_expires_at = now() + greatest(p_lease_ms, 1) * interval '1 millisecond'
    FROM unnest(p_ids, p_attempts) AS c(id, attempt)
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt, j.lease_expires_at, j.cancel_requested_at IS NOT NULL
$$;

CREATE FUNCTION reap_expired(p_batch bigint)
RETURNS TABLE (id bigint, attempt integer, lease_owner text, state text, queue text)
LANGUAGE sql VOLATILE AS $$
    -- Candidates in expiry order, FOR UPDATE SKIP LOCKED (a row being completed is locked by
    -- its completer and skipped); the UPDATE re-checks the lease on the locked version. A
    -- crash consumes the attempt it was claimed with; a job an operator asked to cancel is
    -- cancelled rather than requeued.
    WITH expired AS (
        SELECT e.id, e.lease_owner
        FROM jobs AS e
        WHERE e.state = 'running' AND e.lease_expires_at < now()
        ORDER BY e.lease_expires_at
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs AS j
    SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      WHEN j.attempt >= j.max_attempts THEN 'dead'
                      ELSE 'pending' END,
        run_at = CASE WHEN j.attempt >= j.max_attempts OR j.cancel_requested_at IS NOT NULL THEN j.run_at
                      ELSE now() + backoff_delay(jsonb_array_length(j.errors) + 1,
                                                 j.backoff_base_ms, j.backoff_cap_ms) END,
        finished_at = CASE WHEN j.attempt >= j.max_attempts OR j.cancel_requested_at IS NOT NULL
                           THEN now() ELSE NULL END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        errors = push_error(j.errors, jsonb_build_object(
            'attempt', j.attempt - j.released, 'at', now(), 'class', 'lease_expired',
            'message', 'lease expired: the worker crashed, stalled or lost its connection',
            'owner', expired.lease_owner))
    FROM expired
    WHERE j.id = expired.id
      AND j.state = 'running'
      AND j.lease_expires_at < now()
    RETURNING j.id, j.attempt, expired.lease_owner, j.state, j.queue
$$;

CREATE FUNCTION prune_finished(p_states text[], p_retention_ms bigint, p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- Only terminal rows, past their retention by finished_at (database clock); SKIP LOCKED
    -- so it never waits on an operator's retry; bounded so each statement stays small.
    WITH doomed AS (
        SELECT d.id
        FROM jobs AS d
        WHERE d.state = ANY(p_states)
          AND d.state IN ('succeeded', 'dead', 'cancelled')
          AND d.finished_at IS NOT NULL
          AND d.finished_at < now() - p_retention_ms * interval '1 millisecond'
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM jobs AS j USING doomed WHERE j.id = doomed.id RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

CREATE FUNCTION cancel_job(p_id bigint)
RETURNS TABLE (previous_state text)
LANGUAGE sql VOLATILE AS $$
    -- A pending job is cancelled at once; a running one is flagged and stays running (lease
    -- and token unchanged) until its worker records the cancellation through a fenced write
    -- or the reaper takes it back. The request is kept in the job's history with the
    -- database role that asked (session_user: the login role, not this function's owner).
    WITH cur AS (
        SELECT c.id, c.state FROM jobs AS c WHERE c.id = p_id FOR UPDATE
    )
    UPDATE jobs AS j
    SET state = CASE WHEN cur.state = 'pending' THEN 'cancelled' ELSE j.state END,
        finished_at = CASE WHEN cur.state = 'pending' THEN now() ELSE j.finished_at END,
        cancel_requested_at = coalesce(j.cancel_requested_at, now()),
        errors = CASE WHEN j.cancel_requested_at IS NULL
                      THEN push_error(j.errors, jsonb_build_object(
                           'attempt', j.attempt - j.released, 'at', now(), 'class', 'cancel_requested',
                           'owner', session_user::text,
                           'message', 'cancel requested by role ' || session_user::text))
                      ELSE j.errors END,
        blocked = false
    FROM cur
    WHERE j.id = cur.id AND cur.state IN ('pending', 'running')
    RETURNING cur.state
$$;

CREATE FUNCTION retry_job(p_id bigint, p_extra integer)
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE AS $$
    -- A dead or cancelled job back to pending now, keeping its id, attempt counter and
    -- history; exactly p_extra (1..1000) more claims are allowed. A unique key already held
    -- by another live job raises unique_violation.
    UPDATE jobs AS j
    SET state = 'pending',
        run_at = now(),
        finished_at = NULL,
        cancel_requested_at = NULL,
        max_attempts = j.attempt + p_extra
    WHERE j.id = p_id AND j.state IN ('dead', 'cancelled') AND p_extra BETWEEN 1 AND 1000
    RETURNING j.id
$$;

CREATE FUNCTION run_job_now(p_id bigint)
RETURNS TABLE (queue text)
LANGUAGE sql VOLATILE AS $$
    -- Only a pending job scheduled for later; attempt and budget untouched.
    UPDATE jobs AS j
    SET run_at = now()
    WHERE j.id = p_id AND j.state = 'pending' AND j.run_at > now()
    RETURNING j.queue
$$;

CREATE FUNCTION skip_job(p_id bigint)
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE AS $$
    -- A dead job is set aside as cancelled, with an entry in its history.
    UPDATE jobs AS j
    SET state = 'cancelled',
        finished_at = now(),
        errors = push_error(j.errors, jsonb_build_object(
            'attempt', j.attempt - j.released, 'at', now(), 'class', 'skipped',
            'message', 'skipped by an operator'))
    WHERE j.id = p_id AND j.state = 'dead'
    RETURNING j.id
$$;

-- A number PostgreSQL would store as more than 1,024 characters (`1e131000` is 31 bytes in,
-- 131 KB stored). Only documents over 1,024 bytes as text can hold one, so the walk runs
-- only for those (the trigger's WHEN below).
CREATE FUNCTION jsonb_has_long_number(p_doc jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
    SELECT EXISTS (
        SELECT 1 FROM jsonb_path_query(p_doc, 'strict $.** ? (@.type() == "number")') AS n(v)
        WHERE octet_length(n.v::text) > 1024)
$$;

CREATE OR REPLACE FUNCTION jobs_input_rejected() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN (octet_length(NEW.queue) BETWEEN 1 AND 64) IS FALSE THEN 'jobs_queue_length'
        WHEN (octet_length(NEW.kind) BETWEEN 1 AND 128) IS FALSE THEN 'jobs_kind_length'
        WHEN (NEW.max_attempts > 0) IS FALSE THEN 'jobs_max_attempts_positive'
        WHEN (NEW.priority BETWEEN -100 AND 100) IS FALSE THEN 'jobs_priority_range'
        WHEN (octet_length(NEW.args::text) <= 262144) IS FALSE THEN 'jobs_args_size'
        WHEN (jsonb_typeof(NEW.metadata) = 'object') IS FALSE THEN 'jobs_metadata_object'
        WHEN (octet_length(NEW.metadata::text) <= 16384) IS FALSE THEN 'jobs_metadata_size'
        WHEN (jsonb_typeof(NEW.errors) = 'array') IS FALSE THEN 'jobs_errors_array'
        WHEN (octet_length(NEW.errors::text) <= 262144) IS FALSE THEN 'jobs_errors_size'
        WHEN (octet_length(NEW.unique_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_unique_key_length'
        WHEN (octet_length(NEW.ordering_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_ordering_key_length'
        WHEN (octet_length(NEW.concurrency_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_concurrency_key_length'
        WHEN (octet_length(NEW.args::text) > 1024 AND jsonb_has_long_number(NEW.args))
          OR (octet_length(NEW.metadata::text) > 1024 AND jsonb_has_long_number(NEW.metadata))
            THEN 'jobs_number_length'
        ELSE 'jobs_backoff_range'
    END;
    -- No DETAIL with the row: the client's message must never carry job data.
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, rule
        USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = TG_TABLE_NAME,
              SCHEMA = TG_TABLE_SCHEMA;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION jobs_input_rejected() SET search_path = pg_catalog, %I', current_schema());
END
$$;

DROP TRIGGER jobs_input_rules ON jobs;
CREATE TRIGGER jobs_input_rules
AFTER INSERT OR UPDATE OF queue, kind, args, metadata, errors, priority, max_attempts,
    backoff_base_ms, backoff_cap_ms, ordering_key, concurrency_key, unique_key
ON jobs FOR EACH ROW
WHEN ((octet_length(NEW.queue) BETWEEN 1 AND 64) IS FALSE
   OR (octet_length(NEW.kind) BETWEEN 1 AND 128) IS FALSE
   OR (NEW.max_attempts > 0) IS FALSE
   OR (NEW.priority BETWEEN -100 AND 100) IS FALSE
   OR (octet_length(NEW.args::text) <= 262144) IS FALSE
   OR (jsonb_typeof(NEW.metadata) = 'object') IS FALSE
   OR (octet_length(NEW.metadata::text) <= 16384) IS FALSE
   OR (jsonb_typeof(NEW.errors) = 'array') IS FALSE
   OR (octet_length(NEW.errors::text) <= 262144) IS FALSE
   OR (octet_length(NEW.unique_key) BETWEEN 1 AND 512) IS FALSE
   OR (octet_length(NEW.ordering_key) BETWEEN 1 AND 512) IS FALSE
   OR (octet_length(NEW.concurrency_key) BETWEEN 1 AND 512) IS FALSE
   OR (octet_length(NEW.args::text) > 1024 AND jsonb_has_long_number(NEW.args))
   OR (octet_length(NEW.metadata::text) > 1024 AND jsonb_has_long_number(NEW.metadata))
   OR (coalesce(NEW.backoff_base_ms BETWEEN 1 AND 604800000, true)
       AND coalesce(NEW.backoff_cap_ms BETWEEN coalesce(NEW.backoff_base_ms, 1) AND 2592000000, true)) IS FALSE)
EXECUTE FUNCTION jobs_input_rejected();

-- Definers with a pinned path; nobody but the owner and the roles given EXECUTE may call
-- them. claim(), claim_controlled(), unblock_keys() and enqueue_many() write jobs too and
-- become definers as well (they were invokers, relying on the caller's table privileges).
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'complete_fenced(bigint[], integer[], text)',
        'complete_delete_fenced(bigint[], integer[], text)',
        'fail_fenced(bigint[], integer[], text[], text[], bigint[], text)',
        'snooze_fenced(bigint[], integer[], bigint[], text)',
        'heartbeat_fenced(bigint[], integer[], text, bigint)',
        'reap_expired(bigint)',
        'prune_finished(text[], bigint, bigint)',
        'cancel_job(bigint)',
        'retry_job(bigint, integer)',
        'run_job_now(bigint)',
        'skip_job(bigint)',
        'claim(text, integer, text, bigint, bigint, boolean, integer)',
        'claim_controlled(text, integer, text, bigint, bigint, integer)',
        'unblock_keys(integer)',
        'enqueue_many(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[])'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        -- Whoever could update jobs directly (a worker role granted before this migration)
        -- may call the functions that now do it.
        FOR writer IN
            SELECT DISTINCT a.grantee::regrole
            FROM pg_class c, aclexplode(c.relacl) AS a
            WHERE c.oid = 'jobs'::regclass AND a.privilege_type = 'UPDATE' AND a.grantee <> 0
              AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, writer);
        END LOOP;
    END LOOP;
END
$$;
