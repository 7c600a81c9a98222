-- Migration 0028: token buckets and claim times on the clock read after the queue's lock.
--
-- claim_controlled() (0014) refilled the buckets with now(), the start of the claim's
-- statement, and stamped attempted_at with it too. A claim of a rate-limited queue may wait
-- for the queue's lock (lock_briefly, up to 50 tries of 1 ms, longer on a loaded machine)
-- after its statement began, so its now() could lie before the previous claim's: the
-- bucket itself stayed within its rate in its own time (refilled_at only moves forward, a
-- late now() refills nothing) but the claim times it left behind did not show it, and a
-- claim that waited long could spend, at a later real instant, tokens credited at an
-- earlier one (13 claims in 218 ms at 10/s with a burst of 10, by attempted_at:
-- scheduling::a_queue_rate_limit_holds_across_four_workers, CI of 2026-12-06).
--
-- Now one instant per claim, read with clock_timestamp() after the queue's lock (or when
-- the claim begins, for a queue without a queue-wide limit): the buckets refill up to it,
-- the jobs' attempted_at and lease start from it. Claims of one limited queue are
-- serialised by that lock, so their instants follow the lock's order, and the bucket's
-- promise (at most burst + rate x window claims in any window) holds for the claim times
-- an operator reads. Key buckets use the same instant; their refilled_at still only moves
-- forward (greatest), so a key claimed by an earlier instant refills nothing.
--
-- The body is migration 0014's with now() replaced by that instant in the buckets and the
-- claimed rows; the scan's run_at <= now() is unchanged (a job due by the statement's
-- start is due).

-- Tokens available at p_at, capped at the burst size.
CREATE FUNCTION bucket_tokens(p_tokens float8, p_refilled_at timestamptz, p_rate integer,
                              p_period_ms bigint, p_at timestamptz)
RETURNS float8 LANGUAGE sql STABLE AS $$
    SELECT least(p_rate::float8, p_tokens + greatest(0, extract(epoch FROM p_at - p_refilled_at)) * 1000.0
                 * p_rate / p_period_ms)
$$;

CREATE OR REPLACE FUNCTION claim_controlled(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint,
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
    -- The instant this claim hands jobs out: taken after the queue's lock (see the header).
    at timestamptz := clock_timestamp();
BEGIN
    SELECT * INTO q FROM queues WHERE name = p_queue;
    IF FOUND AND (q.max_running IS NOT NULL OR q.rate_limit IS NOT NULL) THEN
        IF NOT lock_briefly(lock_space('queue-limit'), hashtext(p_queue), false, 50) THEN
            RETURN;
        END IF;
        -- A fresh snapshot, taken after the lock: every earlier claim of this queue is visible,
        -- and the clock read after it is later than every earlier claim's.
        at := clock_timestamp();
        SELECT * INTO q FROM queues WHERE name = p_queue;
        IF q.max_running IS NOT NULL THEN
            SELECT count(*) INTO n FROM jobs WHERE state = 'running' AND queue = p_queue;
            budget := least(budget, q.max_running - n);
        END IF;
        IF q.rate_limit IS NOT NULL THEN
            queue_tokens := bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms, at);
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
                   AND bucket_tokens(k.tokens, k.refilled_at, k.rate_limit, k.rate_period_ms, at) - n < 1 THEN
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
            lease_expires_at = at + p_lease_ms * interval '1 millisecond',
            attempted_at = at
        FROM next
        WHERE j.id = next.id
        RETURNING j.id
    )
    SELECT array_agg(id) INTO claimed_ids FROM upd;
    n := coalesce(cardinality(claimed_ids), 0);

    IF q.rate_limit IS NOT NULL AND n > 0 THEN
        UPDATE queues SET tokens = queue_tokens - n, refilled_at = greatest(refilled_at, at)
        WHERE name = p_queue;
    END IF;
    -- Keys with a rate: spend their tokens (their claims are serialised by the key lock held).
    UPDATE key_limits kl
    SET tokens = bucket_tokens(kl.tokens, kl.refilled_at, kl.rate_limit, kl.rate_period_ms, at) - c.n,
        refilled_at = greatest(kl.refilled_at, at)
    FROM (SELECT concurrency_key AS key, count(*) AS n FROM jobs
          WHERE id = ANY (claimed_ids) AND concurrency_key IS NOT NULL GROUP BY 1) c
    WHERE kl.key = c.key AND kl.rate_limit IS NOT NULL;

    RETURN QUERY SELECT * FROM jobs WHERE id = ANY (claimed_ids);
END
$function$;

-- CREATE OR REPLACE keeps the function's grants but not its definer settings (0016).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION claim_controlled(text, integer, text, bigint, bigint, integer) '
        'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
