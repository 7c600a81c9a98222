-- Docket migration 0008: the database is the last line of defence, whoever writes.
--
-- * Table CHECKs for what every entry point validates, so that a direct INSERT or UPDATE by
--   any role that may write the table cannot create a job that breaks an invariant: priority
--   -100..100, attempt within its budget, finite times within 1970..9999 (sqlx's decoder
--   panics on `infinity`, and `now() - '-infinity'` is an error that broke stats for the
--   whole database), payload sizes, backoff ranges. NOT VALID: enforced for every new or
--   changed row at once, without rejecting this migration on a table that already holds a
--   bad row (such rows are shown, not hidden: see rows.rs).
-- * One measure for payload size on every path: octet_length(jsonb::text), PostgreSQL's
--   own text form, which the client computes the same way (docket_core::validate::
--   jsonb_text_len). enqueue_many measured pg_column_size (compressed), so the COPY path and
--   the function path disagreed; and its limit came from a session setting
--   (docket.max_args_bytes), so any session could raise it. Both are gone.
-- * The single-job and keyed enqueue functions are SECURITY DEFINER with a pinned
--   search_path, so an application role may enqueue (validated) without any privilege on
--   the table; EXECUTE is revoked from PUBLIC and granted per role (docket grant).

ALTER TABLE jobs
    ADD CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -100 AND 100) NOT VALID,
    ADD CONSTRAINT jobs_attempt_within_budget CHECK (attempt <= max_attempts) NOT VALID,
    ADD CONSTRAINT jobs_times_finite CHECK (
        isfinite(run_at) AND isfinite(created_at)
        AND coalesce(isfinite(attempted_at), true) AND coalesce(isfinite(finished_at), true)
        AND coalesce(isfinite(lease_expires_at), true)
        AND coalesce(isfinite(cancel_requested_at), true)) NOT VALID,
    ADD CONSTRAINT jobs_times_in_range CHECK (
        run_at >= '1970-01-01' AND run_at < '10000-01-01'
        AND created_at >= '1970-01-01' AND created_at < '10000-01-01') NOT VALID,
    ADD CONSTRAINT jobs_args_size CHECK (octet_length(args::text) <= 262144) NOT VALID,
    ADD CONSTRAINT jobs_metadata_size CHECK (octet_length(metadata::text) <= 16384) NOT VALID,
    ADD CONSTRAINT jobs_errors_size CHECK (octet_length(errors::text) <= 262144) NOT VALID,
    ADD CONSTRAINT jobs_unique_key_length CHECK (octet_length(unique_key) BETWEEN 1 AND 512) NOT VALID,
    ADD CONSTRAINT jobs_backoff_range CHECK (
        coalesce(backoff_base_ms BETWEEN 1 AND 604800000, true)
        AND coalesce(backoff_cap_ms BETWEEN coalesce(backoff_base_ms, 1) AND 2592000000, true)) NOT VALID;

CREATE OR REPLACE FUNCTION enqueue_many(
    p_queues text[], p_kinds text[], p_args jsonb[],
    p_priorities smallint[] DEFAULT NULL, p_run_ats timestamptz[] DEFAULT NULL,
    p_delays_ms bigint[] DEFAULT NULL, p_max_attempts integer[] DEFAULT NULL,
    p_unique_keys text[] DEFAULT NULL, p_metadata jsonb[] DEFAULT NULL,
    p_backoff_base_ms bigint[] DEFAULT NULL, p_backoff_cap_ms bigint[] DEFAULT NULL)
RETURNS TABLE (ord integer, id bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    n integer := coalesce(cardinality(p_queues), 0);
    ids bigint[];
    dups boolean[];
    bad record;
    bad_name text;
    existing bigint;
    tries integer;
    -- Resolved once: pg_get_serial_sequence per row cost 8 us a row (catalog lookups).
    seq regclass := pg_get_serial_sequence('jobs', 'id')::regclass;
BEGIN
    IF n = 0 THEN RETURN; END IF;
    IF coalesce(cardinality(p_kinds), 0) <> n OR coalesce(cardinality(p_args), 0) <> n THEN
        RAISE EXCEPTION 'docket: queues, kinds and args must have the same length' USING ERRCODE = '22023';
    END IF;

    -- Names: one regular expression per distinct value (OFFSET 0 keeps the planner from
    -- pushing the test below the DISTINCT, which would run it on every row again).
    SELECT format('queue name %L (1-64 of A-Z a-z 0-9 _ . -)', left(q, 80)) INTO bad_name
    FROM (SELECT DISTINCT q FROM unnest(p_queues) q OFFSET 0) d
    WHERE q IS NULL OR q !~ '^[A-Za-z0-9_.-]{1,64}$' LIMIT 1;
    IF bad_name IS NULL THEN
        SELECT format('kind %L (1-128 of A-Z a-z 0-9 _ . : / -)', left(k, 140)) INTO bad_name
        FROM (SELECT DISTINCT k FROM unnest(p_kinds) k OFFSET 0) d
        WHERE k IS NULL OR k !~ '^[A-Za-z0-9_.:/-]{1,128}$' LIMIT 1;
    END IF;
    IF bad_name IS NOT NULL THEN
        RAISE EXCEPTION 'docket: invalid job: %', bad_name USING ERRCODE = '22023';
    END IF;

    -- Everything else per row, with cheap tests only.
    SELECT t.o, t.a, t.pr, t.ma, t.uk, t.md, t.dl, t.ra INTO bad
    FROM unnest(p_args, p_priorities, p_max_attempts, p_unique_keys, p_metadata, p_delays_ms, p_run_ats)
         WITH ORDINALITY AS t(a, pr, ma, uk, md, dl, ra, o)
    WHERE t.a IS NULL OR octet_length(t.a::text) > 262144
       OR t.pr NOT BETWEEN -100 AND 100
       OR t.ma NOT BETWEEN 1 AND 1000
       OR octet_length(t.uk) NOT BETWEEN 1 AND 512
       OR (t.md IS NOT NULL AND (jsonb_typeof(t.md) <> 'object' OR octet_length(t.md::text) > 16384))
       OR t.dl NOT BETWEEN 0 AND 315360000000
       OR NOT isfinite(t.ra) OR t.ra < '1970-01-01' OR t.ra >= '10000-01-01'
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'docket: invalid job at position %: %', bad.o, CASE
            WHEN bad.a IS NULL THEN 'args is NULL'
            WHEN octet_length(bad.a::text) > 262144 THEN format('args is %s bytes, over the limit of 262144 bytes', octet_length(bad.a::text))
            WHEN bad.pr NOT BETWEEN -100 AND 100 THEN format('priority %s outside -100..100', bad.pr)
            WHEN bad.ma NOT BETWEEN 1 AND 1000 THEN format('max_attempts %s outside 1..1000', bad.ma)
            WHEN octet_length(bad.uk) NOT BETWEEN 1 AND 512 THEN 'unique key must be 1-512 bytes'
            WHEN bad.dl NOT BETWEEN 0 AND 315360000000 THEN 'delay must be 0 to 10 years'
            WHEN NOT isfinite(bad.ra) OR bad.ra < '1970-01-01' OR bad.ra >= '10000-01-01'
                THEN format('run_at %s is outside 1970-01-01 .. 9999-12-31', bad.ra)
            ELSE 'metadata must be a JSON object of at most 16384 bytes' END
            USING ERRCODE = '22023';
    END IF;

    -- Ids first: result i is input i without relying on RETURNING order.
    SELECT array_agg(nextval(seq)) INTO ids FROM generate_series(1, n);

    IF p_unique_keys IS NULL THEN
        INSERT INTO jobs (id, queue, kind, args, priority, run_at, max_attempts, metadata,
                          backoff_base_ms, backoff_cap_ms)
        SELECT t.i, t.q, t.k, t.a, coalesce(t.pr, 0),
               coalesce(t.ra, now() + coalesce(t.dl, 0) * interval '1 millisecond'),
               coalesce(t.ma, 25), coalesce(t.md, '{}'), t.bb, t.bc
        FROM unnest(ids, p_queues, p_kinds, p_args, p_priorities, p_run_ats, p_delays_ms,
                    p_max_attempts, p_metadata, p_backoff_base_ms, p_backoff_cap_ms)
             AS t(i, q, k, a, pr, ra, dl, ma, md, bb, bc);
        dups := array_fill(false, ARRAY[n]);
    ELSE
        -- Unique keys: a row whose key is held by a live job returns that job's id with
        -- duplicate = true. Concurrent enqueues of one key wait on each other in the unique
        -- index (ON CONFLICT); the holder is looked up in a later statement so it sees the
        -- winner's commit.
        WITH ins AS (
            INSERT INTO jobs (id, queue, kind, args, priority, run_at, max_attempts, unique_key,
                              metadata, backoff_base_ms, backoff_cap_ms)
            SELECT t.i, t.q, t.k, t.a, coalesce(t.pr, 0),
                   coalesce(t.ra, now() + coalesce(t.dl, 0) * interval '1 millisecond'),
                   coalesce(t.ma, 25), t.uk, coalesce(t.md, '{}'), t.bb, t.bc
            FROM unnest(ids, p_queues, p_kinds, p_args, p_priorities, p_run_ats, p_delays_ms,
                        p_max_attempts, p_unique_keys, p_metadata, p_backoff_base_ms, p_backoff_cap_ms)
                 WITH ORDINALITY AS t(i, q, k, a, pr, ra, dl, ma, uk, md, bb, bc, o)
            ORDER BY t.o
            ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running')
            DO NOTHING
            RETURNING jobs.id
        )
        SELECT array_agg(ins.id IS NULL ORDER BY t.o) INTO dups
        FROM unnest(ids) WITH ORDINALITY AS t(i, o) LEFT JOIN ins ON ins.id = t.i;

        FOR i IN 1..n LOOP
            CONTINUE WHEN NOT dups[i];
            tries := 0;
            LOOP
                SELECT j.id INTO existing FROM jobs j
                WHERE j.unique_key = p_unique_keys[i] AND j.state IN ('pending', 'running');
                IF FOUND THEN
                    ids[i] := existing;
                    EXIT;
                END IF;
                INSERT INTO jobs (queue, kind, args, priority, run_at, max_attempts, unique_key,
                                  metadata, backoff_base_ms, backoff_cap_ms)
                VALUES (p_queues[i], p_kinds[i], p_args[i], coalesce(p_priorities[i], 0),
                        coalesce(p_run_ats[i], now() + coalesce(p_delays_ms[i], 0) * interval '1 millisecond'),
                        coalesce(p_max_attempts[i], 25), p_unique_keys[i], coalesce(p_metadata[i], '{}'),
                        p_backoff_base_ms[i], p_backoff_cap_ms[i])
                ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running')
                DO NOTHING
                RETURNING jobs.id INTO existing;
                IF FOUND THEN
                    ids[i] := existing;
                    dups[i] := false;
                    EXIT;
                END IF;
                tries := tries + 1;
                IF tries > 20 THEN
                    RAISE EXCEPTION 'docket: unique key % is contended; try again', left(p_unique_keys[i], 80)
                        USING ERRCODE = '40001';
                END IF;
            END LOOP;
        END LOOP;
    END IF;

    -- One wake-up per queue that got a due job (NOTIFY is delivered at commit, and identical
    -- notifications in one transaction are folded by the server).
    PERFORM pg_notify(current_schema() || '_wakeup', w.q)
    FROM (SELECT DISTINCT t.q
          FROM unnest(p_queues, p_run_ats, p_delays_ms, dups) AS t(q, ra, dl, dup)
          WHERE NOT t.dup AND coalesce(t.ra <= now(), coalesce(t.dl, 0) = 0)) w;

    RETURN QUERY SELECT g, ids[g], dups[g] FROM generate_series(1, n) AS g;
END
$$;

-- Enqueue for roles without table privileges: definer rights, a search path that cannot
-- be redirected (pg_temp last), and no EXECUTE for PUBLIC.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION enqueue(text, text, jsonb, smallint, timestamptz, integer, text, jsonb, text, text) SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION enqueue_jobs(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[], text[], text[]) SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION enqueue_many(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[]) SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION enqueue(text, text, jsonb, smallint, timestamptz, integer, text, jsonb, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION enqueue_jobs(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[], text[], text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION enqueue_many(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[]) FROM PUBLIC;
