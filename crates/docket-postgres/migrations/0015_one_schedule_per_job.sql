-- Docket migration 0015: enqueue_many() refuses a job with both run_at and delay.
--
-- Given both, the function used run_at and dropped the delay without a word; now the batch is
-- refused with the position named and nothing written, as for every other bad value.
CREATE OR REPLACE FUNCTION enqueue_many(p_queues text[], p_kinds text[], p_args jsonb[], p_priorities smallint[] DEFAULT NULL::smallint[], p_run_ats timestamp with time zone[] DEFAULT NULL::timestamp with time zone[], p_delays_ms bigint[] DEFAULT NULL::bigint[], p_max_attempts integer[] DEFAULT NULL::integer[], p_unique_keys text[] DEFAULT NULL::text[], p_metadata jsonb[] DEFAULT NULL::jsonb[], p_backoff_base_ms bigint[] DEFAULT NULL::bigint[], p_backoff_cap_ms bigint[] DEFAULT NULL::bigint[])
 RETURNS TABLE(ord integer, id bigint, duplicate boolean)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
AS $function$
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
       OR (t.ra IS NOT NULL AND t.dl IS NOT NULL)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'docket: invalid job at position %: %', bad.o, CASE
            WHEN bad.a IS NULL THEN 'args is NULL'
            WHEN octet_length(bad.a::text) > 262144 THEN format('args is %s bytes, over the limit of 262144 bytes', octet_length(bad.a::text))
            WHEN bad.ra IS NOT NULL AND bad.dl IS NOT NULL
                THEN 'run_at and delay are both given: give one (the other is ignored otherwise)'
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
$function$;

-- As migration 0008: the function's search_path is this schema, then pg_temp last.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION enqueue_many(text[], text[], jsonb[], smallint[], timestamptz[], bigint[], integer[], text[], jsonb[], bigint[], bigint[]) SET search_path = %I, pg_temp', current_schema());
END
$$;
