-- Migration 0032: the transactional outbox — messages for NATS JetStream written inside the
-- application's transaction (so one exists iff that transaction commits) and published by
-- a relay that claims them with a lease and a fencing token, as workers claim jobs.
--
-- * outbox: one row per message. available_at is when a relay may claim it next (written
--   now, then the end of a relay's lease or of the delay after a failed publish); attempt
--   is the fencing token, one more per claim; published_at and stream_seq are set by the
--   relay's fenced mark once JetStream acknowledged the message.
-- * outbox_origin: one random value made here, the first part of every de-duplication id
--   (Nats-Msg-Id = origin-id), so two databases publishing to one stream never collide.
-- * relay: who holds the message's lease (NULL once a failed publish released it to wait
--   out its retry delay), so operators can tell in-flight messages from failing ones.
-- * publish(): the SQL API, granted to the application's role like enqueue(); checks every
--   input (the same limits as docket_core::outbox) and writes nothing when refusing.
-- * outbox_claim(): unkeyed messages and each key's oldest unpublished message, oldest
--   first, whose available_at has passed, locked with SKIP LOCKED. A key's next message is
--   therefore claimable only once its predecessor was marked published — after JetStream
--   acknowledged it — which is what keeps a key's order in the stream. Keys are found in
--   the oldest 2,000 unpublished keyed messages (a window function, no probe per message):
--   a key whose oldest message lies further back waits until the backlog ahead drains.
-- * outbox_mark(), outbox_fail(): fenced on the attempt; a relay whose lease ran out and
--   whose message another relay claimed changes nothing.
-- * prune_outbox(): published messages older than the retention, in bounded batches.
--
-- Additive: new tables and functions only.

CREATE TABLE outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subject text NOT NULL,
    payload jsonb NOT NULL,
    key text,
    headers jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    attempt integer NOT NULL DEFAULT 0,
    relay text,
    errors integer NOT NULL DEFAULT 0,
    last_error text,
    published_at timestamptz,
    stream_seq bigint,
    duplicate boolean
);

-- The relay's two walks, oldest first: keyed and unkeyed unpublished messages. Published rows
-- leave both, so a kept history costs the claim nothing.
CREATE INDEX outbox_keyed ON outbox (id) WHERE published_at IS NULL AND key IS NOT NULL;
CREATE INDEX outbox_unkeyed ON outbox (id) WHERE published_at IS NULL AND key IS NULL;
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

CREATE TABLE outbox_origin (
    origin text PRIMARY KEY CHECK (origin ~ '^[0-9a-f]{16}$')
);
INSERT INTO outbox_origin (origin)
    VALUES (left(replace(gen_random_uuid()::text, '-', ''), 16));

CREATE FUNCTION publish(
    p_subject text,
    p_payload jsonb,
    p_key text DEFAULT NULL,
    p_headers jsonb DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_name text;
    v_value jsonb;
    v_bytes integer := 0;
BEGIN
    IF p_subject IS NULL OR octet_length(p_subject) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox refused: subject must be 1-255 bytes' USING ERRCODE = '22023';
    END IF;
    IF p_subject !~ '^[!-~]+$' OR p_subject ~ '[*>]' OR p_subject ~ '(^\.|\.\.|\.$)' THEN
        RAISE EXCEPTION 'outbox refused: subject % must be printable ASCII tokens separated by single dots, without wildcards', quote_literal(p_subject)
            USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL THEN
        RAISE EXCEPTION 'outbox refused: payload is NULL' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_payload::text) > 1000000 THEN
        RAISE EXCEPTION 'outbox refused: payload is % bytes, over the limit of 1000000 bytes', octet_length(p_payload::text)
            USING ERRCODE = '22023';
    END IF;
    IF p_key IS NOT NULL AND (octet_length(p_key) NOT BETWEEN 1 AND 255 OR p_key ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'outbox refused: key must be 1-255 bytes without control characters'
            USING ERRCODE = '22023';
    END IF;
    IF p_headers IS NOT NULL THEN
        IF jsonb_typeof(p_headers) <> 'object' THEN
            RAISE EXCEPTION 'outbox refused: headers must be a JSON object of strings' USING ERRCODE = '22023';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(p_headers)) > 32 THEN
            RAISE EXCEPTION 'outbox refused: more than 32 headers' USING ERRCODE = '22023';
        END IF;
        FOR v_name, v_value IN SELECT * FROM jsonb_each(p_headers) LOOP
            IF v_name !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]+$' THEN
                RAISE EXCEPTION 'outbox refused: header name % must be token characters', quote_literal(v_name)
                    USING ERRCODE = '22023';
            END IF;
            IF lower(v_name) LIKE 'nats-%' THEN
                RAISE EXCEPTION 'outbox refused: header % is reserved: NATS headers are the relay''s', quote_literal(v_name)
                    USING ERRCODE = '22023';
            END IF;
            IF jsonb_typeof(v_value) <> 'string' OR (v_value #>> '{}') ~ '[\r\n]' THEN
                RAISE EXCEPTION 'outbox refused: header % must be a string without line breaks', quote_literal(v_name)
                    USING ERRCODE = '22023';
            END IF;
            v_bytes := v_bytes + octet_length(v_name) + octet_length(v_value #>> '{}');
        END LOOP;
        IF v_bytes > 16384 THEN
            RAISE EXCEPTION 'outbox refused: headers are % bytes, over the limit of 16384 bytes', v_bytes
                USING ERRCODE = '22023';
        END IF;
        IF p_headers = '{}'::jsonb THEN
            p_headers := NULL;
        END IF;
    END IF;
    INSERT INTO outbox (subject, payload, key, headers)
        VALUES (p_subject, p_payload, p_key, p_headers)
        RETURNING id INTO v_id;
    RETURN v_id;
END
$$;

CREATE FUNCTION outbox_claim(p_relay text, p_limit integer, p_lease_ms bigint)
RETURNS TABLE (id bigint, attempt integer, errors integer, subject text, payload text, key text, headers jsonb)
LANGUAGE sql AS $$
    WITH keyed AS (
        -- The oldest unpublished keyed messages, at most 2,000: a key's oldest among them is
        -- its oldest of all (every earlier message of that key is older still, so inside the
        -- window), found without a probe per message.
        SELECT w.id, w.available_at,
               row_number() OVER (PARTITION BY w.key ORDER BY w.id) AS turn
        FROM (SELECT o.id, o.key, o.available_at
              FROM outbox o
              WHERE o.published_at IS NULL AND o.key IS NOT NULL
              ORDER BY o.id
              LIMIT 2000) w
    ), keyed_heads AS (
        SELECT o.id
        FROM outbox o
        WHERE o.id IN (SELECT k.id FROM keyed k
                       WHERE k.turn = 1 AND k.available_at <= statement_timestamp())
          AND o.published_at IS NULL
          AND o.available_at <= statement_timestamp()
        ORDER BY o.id
        LIMIT least(greatest(p_limit, 1), 1000)
        FOR UPDATE SKIP LOCKED
    ), unkeyed AS (
        -- Locked as the index is walked, so what a concurrent claim holds is skipped
        -- without counting against the limit (lanes and relays claim side by side).
        SELECT u.id
        FROM outbox u
        WHERE u.published_at IS NULL AND u.key IS NULL
          AND u.available_at <= statement_timestamp()
        ORDER BY u.id
        LIMIT least(greatest(p_limit, 1), 1000)
        FOR UPDATE SKIP LOCKED
    ), heads AS (
        SELECT h.id
        FROM (SELECT id FROM keyed_heads UNION ALL SELECT id FROM unkeyed) h
        ORDER BY h.id
        LIMIT least(greatest(p_limit, 1), 1000)
    )
    UPDATE outbox o
    SET attempt = o.attempt + 1,
        relay = p_relay,
        available_at = statement_timestamp() + p_lease_ms * interval '1 millisecond'
    FROM heads
    WHERE o.id = heads.id
    RETURNING o.id, o.attempt, o.errors, o.subject, o.payload::text, o.key, o.headers
$$;

CREATE FUNCTION outbox_mark(p_ids bigint[], p_attempts integer[], p_seqs bigint[], p_dups boolean[])
RETURNS bigint
LANGUAGE sql AS $$
    WITH m AS (
        SELECT * FROM unnest(p_ids, p_attempts, p_seqs, p_dups) AS m(id, attempt, seq, dup)
        ORDER BY 1
    ), marked AS (
        UPDATE outbox o
        SET published_at = statement_timestamp(), stream_seq = m.seq, duplicate = m.dup
        FROM m
        WHERE o.id = m.id
          AND o.attempt = m.attempt
          AND o.published_at IS NULL
        RETURNING 1
    )
    SELECT count(*) FROM marked
$$;

CREATE FUNCTION outbox_fail(p_id bigint, p_attempt integer, p_error text, p_retry_ms bigint)
RETURNS boolean
LANGUAGE sql AS $$
    WITH failed AS (
        UPDATE outbox o
        SET errors = o.errors + 1,
            relay = NULL,
            last_error = left(p_error, 2000),
            available_at = statement_timestamp() + greatest(p_retry_ms, 0) * interval '1 millisecond'
        WHERE o.id = p_id
          AND o.attempt = p_attempt
          AND o.published_at IS NULL
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM failed)
$$;

CREATE FUNCTION prune_outbox(p_retention_ms bigint, p_limit integer)
RETURNS bigint
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM outbox
        WHERE id IN (
            SELECT id FROM outbox
            WHERE published_at < statement_timestamp() - p_retention_ms * interval '1 millisecond'
            ORDER BY published_at
            LIMIT least(greatest(p_limit, 1), 100000)
            FOR UPDATE SKIP LOCKED)
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

-- Definers with a pinned path. The relay's functions go to whoever may claim jobs (as in
-- migration 0030); publish() to the same roles here, and to the application's role by
-- docket grant (as enqueue()).
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'publish(text, jsonb, text, jsonb)',
        'outbox_claim(text, integer, bigint)',
        'outbox_mark(bigint[], integer[], bigint[], boolean[])',
        'outbox_fail(bigint, integer, text, bigint)',
        'prune_outbox(bigint, integer)'
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
