-- Docket migration 0005: scheduling controls, enforced inside the database.
--
-- * Per-key ordering: jobs sharing an ordering_key run one at a time, in id (enqueue) order;
--   only the oldest unfinished job of a key (pending, running or dead) is claimable.
-- * Concurrency limits per queue (queues.max_running) and per concurrency_key (a default per
--   queue, queues.key_max_running, or an explicit key_limits row), global across workers.
-- * Token-bucket rate limits per queue and per key.
-- * Pause / resume of a queue.
-- * Periodic (cron) definitions; the ticks are computed by the leader (see docket-worker).
--
-- How a claim stays correct across workers: every claim runs claim() below, a PL/pgSQL
-- function whose statements each take a fresh snapshot (READ COMMITTED). It first takes a
-- *shared* advisory lock on its queue; pause and limit changes take that lock exclusively, so
-- they wait for claims in flight and every later claim sees them. A limited queue's claims
-- then serialise on a second advisory lock and count running jobs *after* acquiring it, so
-- two claimers can never both see the last free slot. Keys are decided under an exclusive
-- try-lock per key (skipped when taken, like SKIP LOCKED), again counting after the lock.
-- The claimer never waits for a row or a key another transaction holds, so claims cannot
-- deadlock with completions.
--
-- Why "blocked": a key that cannot run (its head is running or dead, or it is at its limit)
-- may have millions of pending jobs at the front of the queue. The first claim that finds
-- such a job flags it blocked, which takes it out of the claim indexes; it is unflagged when
-- its key frees up (trigger below), by operator commands, and by a periodic sweep. The flag
-- only affects *speed*: every claim re-checks eligibility under the key's lock.

ALTER TABLE jobs
    ADD COLUMN ordering_key text,
    ADD COLUMN concurrency_key text,
    ADD COLUMN blocked boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT jobs_ordering_key_length CHECK (octet_length(ordering_key) BETWEEN 1 AND 512),
    ADD CONSTRAINT jobs_concurrency_key_length CHECK (octet_length(concurrency_key) BETWEEN 1 AND 512),
    ADD CONSTRAINT jobs_blocked_is_pending_keyed CHECK (
        NOT blocked OR (state = 'pending' AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL)));

-- The claim indexes hold exactly the rows a claim may take, and no longer end with the id.
-- A drain leaves one dead entry per claimed job at the front of the claim index until vacuum
-- reaches it, and every claim walks them: with 500,000 done jobs that was 2,840 index pages
-- and 4.2 ms per claim of 100. Without the unique id at the end of the key, equal keys (a bulk
-- enqueue shares one run_at) are stored as deduplicated posting lists: 438 pages and 0.29 ms
-- in the same state, and 7 MB instead of 47 MB. So jobs are claimed by priority, then run_at;
-- jobs with the same priority and run_at (one bulk enqueue) come in physical order, which is
-- insertion order unless the table reuses freed space. Per-key ordering has its own id index.
DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (queue, priority, run_at) WHERE state = 'pending' AND NOT blocked;
DROP INDEX jobs_age_idx;
CREATE INDEX jobs_age_idx ON jobs (queue, run_at) WHERE state = 'pending' AND NOT blocked;
-- "Does this queue have keyed work to decide?" — one probe routes a claim to the keyed path.
CREATE INDEX jobs_keyed_ready_idx ON jobs (queue, run_at)
    WHERE state = 'pending' AND NOT blocked AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL);
-- The unfinished jobs of an ordering key in order: the head check and the next head.
CREATE INDEX jobs_ordering_idx ON jobs (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running', 'dead');
-- Running jobs per concurrency key (small: bounded by the workers' total concurrency).
CREATE INDEX jobs_concurrency_running_idx ON jobs (concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
-- Blocked jobs per concurrency key, best first: the next one to unblock when a slot frees.
CREATE INDEX jobs_concurrency_blocked_idx ON jobs (concurrency_key, priority, run_at, id)
    WHERE state = 'pending' AND blocked AND concurrency_key IS NOT NULL;

-- Queue controls. A queue without a row has none (the common, fastest case).
CREATE TABLE queues (
    name            text PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 64),
    paused_at       timestamptz,
    -- Global cap on running jobs of the queue.
    max_running     integer CHECK (max_running > 0),
    -- Default cap per concurrency_key for keys without their own key_limits row.
    key_max_running integer CHECK (key_max_running > 0),
    -- Token bucket: rate_limit claims per rate_period_ms, bursts up to rate_limit.
    rate_limit      integer CHECK (rate_limit > 0),
    rate_period_ms  bigint  CHECK (rate_period_ms > 0),
    tokens          float8      NOT NULL DEFAULT 0,
    refilled_at     timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_rate_complete CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- Limits of one concurrency key (e.g. a tenant), across every queue.
CREATE TABLE key_limits (
    key            text PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 512),
    max_running    integer CHECK (max_running > 0),
    rate_limit     integer CHECK (rate_limit > 0),
    rate_period_ms bigint  CHECK (rate_period_ms > 0),
    tokens         float8      NOT NULL DEFAULT 0,
    refilled_at    timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT key_limits_rate_complete CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- Periodic jobs. next_tick_at is the next tick not yet enqueued; advancing it is a
-- compare-and-set done in the transaction that enqueues the tick's job, so a tick is
-- enqueued once however many leaders (even overlapping ones) try.
CREATE TABLE periodic (
    name          text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    cron          text        NOT NULL CHECK (octet_length(cron) BETWEEN 1 AND 256),
    timezone      text        NOT NULL DEFAULT 'UTC',
    queue         text        NOT NULL CHECK (octet_length(queue) BETWEEN 1 AND 64),
    kind          text        NOT NULL CHECK (octet_length(kind) BETWEEN 1 AND 128),
    args          jsonb       NOT NULL DEFAULT '{}',
    priority      smallint    NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    missed        text        NOT NULL DEFAULT 'latest' CHECK (missed IN ('skip', 'latest', 'all')),
    next_tick_at  timestamptz NOT NULL,
    last_tick_at  timestamptz,
    last_job_id   bigint,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Advisory lock namespaces of this schema (two-integer form: namespace, hashtext(name)).
CREATE FUNCTION lock_space(p_what text) RETURNS integer
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT hashtext(current_schema() || '/' || p_what)
$$;

-- Token bucket refill: tokens available now, capped at the burst size.
CREATE FUNCTION bucket_tokens(p_tokens float8, p_refilled_at timestamptz, p_rate integer, p_period_ms bigint)
RETURNS float8 LANGUAGE sql STABLE AS $$
    SELECT least(p_rate::float8, p_tokens + greatest(0, extract(epoch FROM now() - p_refilled_at)) * 1000.0
                 * p_rate / p_period_ms)
$$;

-- The claim. Parameters: queue, limit, owner, lease_ms, starvation bound ms (NULL: strict
-- priority). After the shared queue lock and the routing: when no job has waited past the
-- bound (the common case) the single-branch statement of sql/claim_ready.sql, else the
-- two-branch fairness statement of sql/claim_fast.sql. Measured with the pgbench harness of
-- docs/benchmarks.md, the two-branch statement cost about 20 % of the drain rate even when no
-- job was starving. Both are repeated verbatim from those files so `docket explain` shows the
-- plans that run; a unit test keeps them identical. Both update
-- `WHERE id = ANY (ARRAY(SELECT id FROM next))` rather than joining `next`: PL/pgSQL may
-- switch to a generic plan, and the generic plan of the join (LIMIT $2 estimated at 10 % of
-- the table) hash-joins a sequential scan of the table; the array form probes the primary key
-- in every plan.
CREATE FUNCTION claim(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint, p_starve_ms bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    q queues%ROWTYPE;
BEGIN
    IF p_limit <= 0 THEN RETURN; END IF;
    PERFORM pg_advisory_xact_lock_shared(lock_space('queue'), hashtext(p_queue));
    SELECT * INTO q FROM queues WHERE name = p_queue;
    IF FOUND AND q.paused_at IS NOT NULL THEN RETURN; END IF;
    IF (NOT FOUND OR (q.max_running IS NULL AND q.rate_limit IS NULL))
       AND NOT EXISTS (SELECT 1 FROM jobs
                       WHERE state = 'pending' AND NOT blocked AND queue = p_queue AND run_at <= now()
                         AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL)) THEN
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
    RETURN QUERY SELECT * FROM claim_controlled(p_queue, p_limit, p_owner, p_lease_ms, p_starve_ms);
END
$$;

-- The controlled path: limits, rate limits and keys. See the header for the locking.
CREATE FUNCTION claim_controlled(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint,
                                 p_starve_ms bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    q queues%ROWTYPE;
    k key_limits%ROWTYPE;
    budget integer := p_limit;
    queue_tokens float8;
    n integer;
    lim integer;
    r record;
    scanned integer := 0;
    -- How far one claim looks past jobs it cannot take (rate-limited keys are skipped, not
    -- blocked, so they are walked again; everything else is flagged once and then skipped).
    depth integer := p_limit * 4 + 200;
    chosen bigint[] := '{}';
    chosen_okeys text[] := '{}';
    chosen_ckeys text[] := '{}';
    claimed_ids bigint[];
    ks integer := lock_space('key');
BEGIN
    SELECT * INTO q FROM queues WHERE name = p_queue;
    IF FOUND AND (q.max_running IS NOT NULL OR q.rate_limit IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(lock_space('queue-limit'), hashtext(p_queue));
        -- A fresh snapshot, taken after the lock: every earlier claim of this queue is visible.
        SELECT * INTO q FROM queues WHERE name = p_queue;
        IF q.max_running IS NOT NULL THEN
            SELECT count(*) INTO n FROM jobs WHERE state = 'running' AND queue = p_queue;
            budget := least(budget, q.max_running - n);
        END IF;
        IF q.rate_limit IS NOT NULL THEN
            queue_tokens := bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms);
            budget := least(budget, floor(queue_tokens)::integer);
        END IF;
        IF budget <= 0 THEN RETURN; END IF;
    END IF;

    FOR r IN
        (SELECT j.id, j.ordering_key, j.concurrency_key FROM jobs j
         WHERE j.state = 'pending' AND NOT j.blocked AND j.queue = p_queue
           AND j.run_at <= now() - p_starve_ms * interval '1 millisecond'
         ORDER BY j.run_at LIMIT depth)
        UNION ALL
        (SELECT j.id, j.ordering_key, j.concurrency_key FROM jobs j
         WHERE j.state = 'pending' AND NOT j.blocked AND j.queue = p_queue AND j.run_at <= now()
         ORDER BY j.priority, j.run_at LIMIT depth)
    LOOP
        scanned := scanned + 1;
        EXIT WHEN scanned > 2 * depth OR cardinality(chosen) >= budget;
        CONTINUE WHEN r.id = ANY (chosen);

        IF r.ordering_key IS NOT NULL THEN
            -- One job per ordering key per batch: a second one cannot be the head.
            CONTINUE WHEN r.ordering_key = ANY (chosen_okeys);
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(ks, hashtext('o:' || r.ordering_key));
            IF EXISTS (SELECT 1 FROM jobs o WHERE o.ordering_key = r.ordering_key
                         AND o.state IN ('pending', 'running', 'dead') AND o.id < r.id)
               OR EXISTS (SELECT 1 FROM jobs o WHERE o.ordering_key = r.ordering_key AND o.state = 'running') THEN
                UPDATE jobs SET blocked = true
                WHERE id = (SELECT id FROM jobs WHERE id = r.id AND state = 'pending' FOR UPDATE SKIP LOCKED);
                CONTINUE;
            END IF;
        END IF;

        IF r.concurrency_key IS NOT NULL THEN
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(ks, hashtext('c:' || r.concurrency_key));
            k := NULL;
            SELECT * INTO k FROM key_limits WHERE key = r.concurrency_key;
            lim := coalesce(k.max_running, q.key_max_running);
            SELECT count(*) INTO n FROM unnest(chosen_ckeys) c WHERE c = r.concurrency_key;
            IF lim IS NOT NULL THEN
                IF n + (SELECT count(*) FROM jobs WHERE state = 'running' AND concurrency_key = r.concurrency_key) >= lim THEN
                    UPDATE jobs SET blocked = true
                    WHERE id = (SELECT id FROM jobs WHERE id = r.id AND state = 'pending' FOR UPDATE SKIP LOCKED);
                    CONTINUE;
                END IF;
            END IF;
            -- Out of tokens: skipped, not blocked (tokens come back with time, not with an event).
            CONTINUE WHEN k.rate_limit IS NOT NULL
                AND bucket_tokens(k.tokens, k.refilled_at, k.rate_limit, k.rate_period_ms) - n < 1;
        END IF;

        chosen := chosen || r.id;
        IF r.ordering_key IS NOT NULL THEN chosen_okeys := chosen_okeys || r.ordering_key; END IF;
        IF r.concurrency_key IS NOT NULL THEN chosen_ckeys := chosen_ckeys || r.concurrency_key; END IF;
    END LOOP;

    IF cardinality(chosen) = 0 THEN RETURN; END IF;

    WITH next AS (
        SELECT id FROM jobs
        WHERE id = ANY (chosen) AND state = 'pending' AND NOT blocked
        FOR UPDATE SKIP LOCKED
    ), upd AS (
        UPDATE jobs AS j
        SET state = 'running',
            attempt = j.attempt + 1,
            lease_owner = p_owner,
            lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
            attempted_at = now()
        FROM next
        WHERE j.id = next.id
        RETURNING j.id
    )
    SELECT array_agg(id) INTO claimed_ids FROM upd;
    n := coalesce(cardinality(claimed_ids), 0);

    IF q.rate_limit IS NOT NULL AND n > 0 THEN
        UPDATE queues SET tokens = queue_tokens - n, refilled_at = greatest(refilled_at, now())
        WHERE name = p_queue;
    END IF;
    -- Keys with a rate: spend their tokens (their claims are serialised by the key lock held).
    UPDATE key_limits kl
    SET tokens = bucket_tokens(kl.tokens, kl.refilled_at, kl.rate_limit, kl.rate_period_ms) - c.n,
        refilled_at = greatest(kl.refilled_at, now())
    FROM (SELECT concurrency_key AS key, count(*) AS n FROM jobs
          WHERE id = ANY (claimed_ids) AND concurrency_key IS NOT NULL GROUP BY 1) c
    WHERE kl.key = c.key AND kl.rate_limit IS NOT NULL;

    RETURN QUERY SELECT * FROM jobs WHERE id = ANY (claimed_ids);
END
$$;

-- When a keyed job leaves a state that held its key, unflag the next job that may now run:
-- the oldest blocked job of its ordering key when it finished (succeeded or cancelled), the
-- best blocked job of its concurrency key when it stopped running. The shared key lock makes
-- this wait for a claim that is deciding the key (and flagging jobs) to commit, so the
-- UPDATE's fresh snapshot sees that claim's flags: no flag is ever left behind.
CREATE FUNCTION jobs_release_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.ordering_key IS NOT NULL AND NEW.state IN ('succeeded', 'cancelled') THEN
        PERFORM pg_advisory_xact_lock_shared(lock_space('key'), hashtext('o:' || OLD.ordering_key));
        UPDATE jobs SET blocked = false
        WHERE id = (SELECT id FROM jobs
                    WHERE ordering_key = OLD.ordering_key AND state = 'pending' AND blocked
                    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
    END IF;
    IF OLD.concurrency_key IS NOT NULL AND OLD.state = 'running' THEN
        PERFORM pg_advisory_xact_lock_shared(lock_space('key'), hashtext('c:' || OLD.concurrency_key));
        UPDATE jobs SET blocked = false
        WHERE id = (SELECT id FROM jobs
                    WHERE concurrency_key = OLD.concurrency_key AND state = 'pending' AND blocked
                    ORDER BY priority, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_release_keys AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN ((OLD.ordering_key IS NOT NULL OR OLD.concurrency_key IS NOT NULL)
          AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION jobs_release_keys();

-- Safety net and limit changes: unflag blocked jobs whose key could run now. Bounded by
-- p_batch keys of each kind; returns how many jobs it unflagged. Run by the leader and by
-- every command that changes a limit. Unflagging too much is harmless (the claim re-checks).
CREATE FUNCTION unblock_keys(p_batch integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    total integer := 0;
    n integer;
    free integer;
    lim integer;
    r record;
BEGIN
    -- Ordering keys whose head (oldest unfinished job) is pending but flagged.
    FOR r IN SELECT DISTINCT ordering_key AS key FROM jobs
             WHERE state = 'pending' AND blocked AND ordering_key IS NOT NULL LIMIT p_batch LOOP
        UPDATE jobs SET blocked = false
        WHERE id = (SELECT h.id FROM (SELECT o.id, o.state, o.blocked FROM jobs o
                                      WHERE o.ordering_key = r.key AND o.state IN ('pending', 'running', 'dead')
                                      ORDER BY o.id LIMIT 1) h
                    WHERE h.state = 'pending' AND h.blocked)
          AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.ordering_key = r.key AND o.state = 'running');
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    -- Concurrency keys: as many jobs as the key has free slots (up to p_batch without a limit).
    FOR r IN SELECT DISTINCT ON (concurrency_key) concurrency_key AS key, queue FROM jobs
             WHERE state = 'pending' AND blocked AND concurrency_key IS NOT NULL
             ORDER BY concurrency_key LIMIT p_batch LOOP
        lim := (SELECT max_running FROM key_limits WHERE key = r.key);
        IF lim IS NULL THEN
            lim := (SELECT key_max_running FROM queues WHERE name = r.queue);
        END IF;
        free := coalesce(lim, p_batch)
              - (SELECT count(*) FROM jobs WHERE state = 'running' AND concurrency_key = r.key)
              - (SELECT count(*) FROM jobs WHERE state = 'pending' AND NOT blocked AND concurrency_key = r.key);
        CONTINUE WHEN free <= 0;
        UPDATE jobs SET blocked = false
        WHERE id IN (SELECT b.id FROM jobs b
                     WHERE b.concurrency_key = r.key AND b.state = 'pending' AND b.blocked
                     ORDER BY b.priority, b.run_at, b.id LIMIT free
                     FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    RETURN total;
END
$$;

-- Enqueue with keys: the same validation and insert as enqueue_many, then the keys of the
-- rows it inserted (never of an existing job returned for a unique key). One statement for
-- callers; the second write only happens for keyed jobs.
CREATE FUNCTION enqueue_jobs(
    p_queues text[], p_kinds text[], p_args jsonb[],
    p_priorities smallint[], p_run_ats timestamptz[], p_delays_ms bigint[],
    p_max_attempts integer[], p_unique_keys text[], p_metadata jsonb[],
    p_backoff_base_ms bigint[], p_backoff_cap_ms bigint[],
    p_ordering_keys text[], p_concurrency_keys text[])
RETURNS TABLE (ord integer, id bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    bad bigint;
    ids bigint[];
    dups boolean[];
BEGIN
    IF p_ordering_keys IS NULL AND p_concurrency_keys IS NULL THEN
        RETURN QUERY SELECT * FROM enqueue_many(p_queues, p_kinds, p_args, p_priorities, p_run_ats,
            p_delays_ms, p_max_attempts, p_unique_keys, p_metadata, p_backoff_base_ms, p_backoff_cap_ms);
        RETURN;
    END IF;
    SELECT t.o INTO bad FROM unnest(p_ordering_keys, p_concurrency_keys) WITH ORDINALITY AS t(ok, ck, o)
    WHERE octet_length(t.ok) NOT BETWEEN 1 AND 512 OR octet_length(t.ck) NOT BETWEEN 1 AND 512 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'docket: invalid job at position %: ordering and concurrency keys must be 1-512 bytes', bad
            USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(e.id ORDER BY e.ord), array_agg(e.duplicate ORDER BY e.ord) INTO ids, dups
    FROM enqueue_many(p_queues, p_kinds, p_args, p_priorities, p_run_ats, p_delays_ms,
                      p_max_attempts, p_unique_keys, p_metadata, p_backoff_base_ms, p_backoff_cap_ms) e;
    UPDATE jobs j SET ordering_key = t.ok, concurrency_key = t.ck
    FROM unnest(ids, dups, p_ordering_keys, p_concurrency_keys) AS t(i, d, ok, ck)
    WHERE j.id = t.i AND NOT t.d AND (t.ok IS NOT NULL OR t.ck IS NOT NULL);
    RETURN QUERY SELECT g::integer, ids[g], dups[g] FROM generate_series(1, cardinality(ids)) AS g;
END
$$;

-- Single enqueue for any language or trigger, now with keys.
DROP FUNCTION enqueue(text, text, jsonb, smallint, timestamptz, integer, text, jsonb);
CREATE FUNCTION enqueue(
    p_queue text, p_kind text, p_args jsonb DEFAULT '{}',
    p_priority smallint DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT 25, p_unique_key text DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}', p_ordering_key text DEFAULT NULL,
    p_concurrency_key text DEFAULT NULL)
RETURNS TABLE (id bigint, duplicate boolean)
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $$
    SELECT e.id, e.duplicate FROM enqueue_jobs(
        ARRAY[p_queue], ARRAY[p_kind], ARRAY[p_args], ARRAY[p_priority], ARRAY[p_run_at],
        NULL, ARRAY[p_max_attempts],
        CASE WHEN p_unique_key IS NULL THEN NULL ELSE ARRAY[p_unique_key] END,
        ARRAY[p_metadata], NULL, NULL,
        CASE WHEN p_ordering_key IS NULL THEN NULL ELSE ARRAY[p_ordering_key] END,
        CASE WHEN p_concurrency_key IS NULL THEN NULL ELSE ARRAY[p_concurrency_key] END) e
$$;
