-- Docket migration 0014: claims that do not churn, attempts that count runs, and no lock
-- another connection can hold stops a claim or a completion.
--
-- A worker claims ahead of its free slots (its prefetch buffer) and gives back what waited
-- too long. Two things made that expensive with real handlers:
-- * A buffered job that holds a limit while `running` — every job of a queue with a
--   max_running or a rate, every job with an ordering or concurrency key — held it for work
--   that was not executing: a tenant's limit filled by jobs waiting in one worker's buffer
--   while another worker had free slots. claim() takes a seventh argument, p_controlled: at
--   most that many such jobs (the worker passes its free run slots; NULL: no separate bound,
--   as before). The fast path is unchanged: it only ever takes unkeyed jobs of a queue
--   without limits.
-- * Every release raised `attempt` (the fencing token, which never goes down) and
--   `max_attempts` (to give the budget back): a job that never failed showed "attempt 48 of
--   72". jobs.released counts those claims (sql/snooze_many.sql raises it with every release
--   and snooze), so a user sees attempt - released of max_attempts - released: its runs.
--   The budget rules are untouched (attempt and max_attempts move together on a release).
--
-- jobs_release_keys() (the trigger that hands a key on when its job ends) now also sends the
-- queue's wake-up hint: with keyed work claimed only for free slots, the worker that can run
-- the next job of a key has nothing buffered to start and must be told the key is free.
--
-- claim() and claim_controlled() are dropped and created with the new argument (not
-- overloaded: a six-argument call of an older binary would be ambiguous between the two).
-- Both start with PostgreSQL's default EXECUTE for PUBLIC; they are SECURITY INVOKER, so that
-- grants nothing a role lacks (claiming needs UPDATE on jobs). Re-run `docket grant` after
-- upgrading to revoke the default as before.
--
-- No waiting on locks anyone can take.
--
-- Claims, limit checks and key hand-overs serialise on transaction-scoped advisory locks
-- whose keys are computable (lock_space() hashes the schema's name) and whose functions are
-- PUBLIC: any role that can connect — no privilege on the schema needed — could take
-- pg_advisory_lock(lock_space('queue'), hashtext('Q')) and every claim of queue Q waited for
-- it; workers hung, shutdown waited behind the claim, and the key lock held completions.
-- The keys cannot be hidden (pg_locks shows every held advisory lock to every role), so no
-- claim or completion waits for them any more: lock_briefly() tries for a few milliseconds
-- (the time a legitimate holder — a pause, a limit change, another claim deciding a key —
-- keeps one) and then gives up:
-- * claim(): hands out nothing this time (the worker claims again at its next wake-up or
--   poll); a pause or limit change in progress makes claims back off the same way, so the
--   change still binds every claim that commits after it.
-- * claim_controlled(): a limited queue's limit lock, likewise. It also walks past keys out
--   of tokens: a key over its rate was skipped, not flagged, so 3,000 ready jobs of one
--   1/day tenant filled the claim's whole walk (4 x batch + 200 rows) and held back every
--   other job of the queue; now each further pass (at most 8) leaves out the keys found
--   out of tokens.
-- * jobs_release_keys(): the next job of the key is left flagged blocked; the key sweeper
--   (unblock_keys, every key_sweep_interval) hands the key on. The completion commits.
-- Operators' control changes (sql/queue_lock.sql) still wait for the lock in the lock
-- manager's queue (lock_exclusive_within(), so claims back off while they wait), for at most
-- 5 s, and then fail with a clear error.

ALTER TABLE jobs ADD COLUMN released integer NOT NULL DEFAULT 0;
-- A worker reports how many of the jobs it holds wait in its prefetch buffer (claimed, not
-- yet started), so operators can tell executing from buffered.
ALTER TABLE workers ADD COLUMN buffered integer NOT NULL DEFAULT 0;

DROP FUNCTION claim(text, integer, text, bigint, bigint, boolean);
DROP FUNCTION claim_controlled(text, integer, text, bigint, bigint);

CREATE FUNCTION lock_briefly(p_space integer, p_key integer, p_shared boolean, p_tries integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
DECLARE
    i integer := 1;
BEGIN
    LOOP
        IF p_shared THEN
            IF pg_try_advisory_xact_lock_shared(p_space, p_key) THEN RETURN true; END IF;
        ELSE
            IF pg_try_advisory_xact_lock(p_space, p_key) THEN RETURN true; END IF;
        END IF;
        -- One transaction gives up on a held lock once: later tries in it do not wait again
        -- (a completion of 500 keyed jobs must not wait 500 times).
        IF i >= p_tries OR current_setting('docket.lock_gave_up', true) = 'on' THEN
            PERFORM set_config('docket.lock_gave_up', 'on', true);
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.001);
        i := i + 1;
    END LOOP;
END
$function$;

-- An operator's exclusive lock, waited for in the lock manager's queue (so claims, which only
-- try, back off while it waits and it is not starved by them), for at most p_timeout_ms;
-- false when it could not be had (another connection holds it). Operators' changes are rare:
-- the subtransaction of the exception block costs nothing that matters here.
CREATE FUNCTION lock_exclusive_within(p_space integer, p_key integer, p_timeout_ms integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
DECLARE
    before text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', p_timeout_ms::text, true);
    BEGIN
        PERFORM pg_advisory_xact_lock(p_space, p_key);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', before, true);
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', before, true);
    RETURN true;
END
$function$;

CREATE FUNCTION claim_controlled(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint,
                                            p_starve_ms bigint, p_controlled integer DEFAULT NULL)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = auto
AS $function$
DECLARE
    q queues%ROWTYPE;
    k key_limits%ROWTYPE;
    budget integer := p_limit;
    n_keyed integer := 0;
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
    -- Keys out of tokens met by this claim: the next pass looks past them.
    rated_out text[] := '{}';
    new_rated integer;
    pass integer := 0;
BEGIN
    SELECT * INTO q FROM queues WHERE name = p_queue;
    IF FOUND AND (q.max_running IS NOT NULL OR q.rate_limit IS NOT NULL) THEN
        IF NOT lock_briefly(lock_space('queue-limit'), hashtext(p_queue), false, 50) THEN
            RETURN;
        END IF;
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
        -- Every job of a limited queue holds its limit while running: only for free slots.
        budget := least(budget, coalesce(p_controlled, budget));
        IF budget <= 0 THEN RETURN; END IF;
    END IF;

    -- Passes: a key out of tokens is skipped, not flagged, so a deep backlog of one such key
    -- could fill the whole walk and hold back every other job of the queue; each further
    -- pass leaves out the keys the earlier ones found out of tokens (at most 8 passes; a
    -- pass ends the claim once it met no new such key or the queue had no more to show).
    LOOP
        pass := pass + 1;
        new_rated := 0;
        scanned := 0;
        FOR r IN
            (SELECT j.id, j.ordering_key, j.concurrency_key FROM jobs j
             WHERE j.state = 'pending' AND NOT j.blocked AND j.queue = p_queue
               AND j.run_at <= now() - p_starve_ms * interval '1 millisecond'
               AND (j.concurrency_key IS NULL OR j.concurrency_key <> ALL (rated_out))
             ORDER BY j.run_at LIMIT depth)
            UNION ALL
            (SELECT j.id, j.ordering_key, j.concurrency_key FROM jobs j
             WHERE j.state = 'pending' AND NOT j.blocked AND j.queue = p_queue AND j.run_at <= now()
               AND (j.concurrency_key IS NULL OR j.concurrency_key <> ALL (rated_out))
             ORDER BY j.priority, j.run_at LIMIT depth)
        LOOP
            scanned := scanned + 1;
            EXIT WHEN scanned > 2 * depth OR cardinality(chosen) >= budget;
            CONTINUE WHEN r.id = ANY (chosen);
            -- A keyed job holds its key while running: only for free slots (decided before any
            -- lock or flag, so a job passed over here is left exactly as it was).
            CONTINUE WHEN (r.ordering_key IS NOT NULL OR r.concurrency_key IS NOT NULL)
                AND n_keyed >= coalesce(p_controlled, p_limit);

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
                -- Out of tokens: skipped, not blocked (tokens come back with time, not with an
                -- event), and remembered, so the next pass looks past all of this key's jobs.
                IF k.rate_limit IS NOT NULL
                   AND bucket_tokens(k.tokens, k.refilled_at, k.rate_limit, k.rate_period_ms) - n < 1 THEN
                    IF NOT r.concurrency_key = ANY (rated_out) THEN
                        rated_out := rated_out || r.concurrency_key;
                        new_rated := new_rated + 1;
                    END IF;
                    CONTINUE;
                END IF;
            END IF;

            chosen := chosen || r.id;
            IF r.ordering_key IS NOT NULL OR r.concurrency_key IS NOT NULL THEN
                n_keyed := n_keyed + 1;
            END IF;
            IF r.ordering_key IS NOT NULL THEN chosen_okeys := chosen_okeys || r.ordering_key; END IF;
            IF r.concurrency_key IS NOT NULL THEN chosen_ckeys := chosen_ckeys || r.concurrency_key; END IF;
        END LOOP;
        EXIT WHEN cardinality(chosen) >= budget OR new_rated = 0 OR scanned < depth OR pass >= 8;
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
$function$;

CREATE FUNCTION claim(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint, p_starve_ms bigint,
                                 p_async boolean DEFAULT false, p_controlled integer DEFAULT NULL)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
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

CREATE OR REPLACE FUNCTION jobs_release_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT
AS $function$
DECLARE
    -- The state the job ended in: a deleted running row (there is no NEW row to read) ended
    -- as a success would have.
    v_state text := 'succeeded';
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_state := NEW.state;
    END IF;
    IF OLD.ordering_key IS NOT NULL AND v_state IN ('succeeded', 'cancelled') THEN
        -- Not a wait: a key whose lock cannot be had at once is left to the key sweeper
        -- (unblock_keys), so a connection holding the key's lock never holds a completion.
        IF lock_briefly(lock_space('key'), hashtext('o:' || OLD.ordering_key), true, 20) THEN
        UPDATE jobs SET blocked = false
        WHERE id = (SELECT id FROM jobs
                    WHERE ordering_key = OLD.ordering_key AND state = 'pending' AND blocked
                    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
        END IF;
    END IF;
    IF OLD.concurrency_key IS NOT NULL AND OLD.state = 'running' THEN
        IF lock_briefly(lock_space('key'), hashtext('c:' || OLD.concurrency_key), true, 20) THEN
        UPDATE jobs SET blocked = false
        WHERE id = (SELECT id FROM jobs
                    WHERE concurrency_key = OLD.concurrency_key AND state = 'pending' AND blocked
                    ORDER BY priority, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED);
        END IF;
    END IF;
    -- Workers no longer buffer keyed work (it is claimed only for free slots), so a key that
    -- frees up must wake them: one hint per queue and transaction (the server folds repeats).
    PERFORM pg_notify(current_schema() || '_wakeup', OLD.queue);
    RETURN NULL;
END
$function$;
