-- Docket migration 0017: a key hand-over that cannot be done at once is recorded, not lost.
--
-- When a keyed job finishes, jobs_release_keys() unflags the next job of its key under the
-- key's advisory lock (shared). It never waits long for that lock (anyone who can connect
-- can hold it: migration 0014), and it gives up when a claim holds it. That claim is the
-- one case that matters: it holds the key's lock because it is flagging the follower
-- blocked behind the job now finishing (it saw that job still running). Both commit; the
-- follower stays flagged with nothing of its key running, and until now only the full key
-- sweep (unblock_keys(), once per prune_interval: 60 s by default) freed it. Keyed queues
-- stalled for up to a minute under load: docket-worker/tests/scheduling.rs, nine keyed
-- tests of four workers each in parallel, took 66 s instead of 7 s in one run of four, or
-- timed out (2026-12-05).
--
-- Now the trigger records the key in key_handovers, in the finishing transaction (so the
-- record commits exactly when the release does), whenever it could not take the key's lock
-- or the next job's row. The leader hands those keys on at every reap interval
-- (hand_over_keys(): under the key's lock, which it gets once the claim has committed, so
-- it sees the flag the claim wrote). What a freed key may release is decided once, in
-- release_ordering_key() / release_concurrency_key(), for the recorded hand-overs and the
-- full sweep alike.

-- No unique key: an INSERT that could conflict would wait for the other inserter, and two
-- batches finishing jobs of the same keys in different orders could deadlock. A key noted
-- twice is handed over twice, which does nothing the second time.
CREATE TABLE key_handovers (
    id bigserial PRIMARY KEY,
    -- 'o:' || ordering_key or 'c:' || concurrency_key: the advisory lock's own name.
    key text NOT NULL,
    queue text NOT NULL,
    noted_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION release_ordering_key(p_key text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    -- The key's head (its oldest pending, running or dead job) is unflagged when it is
    -- pending and flagged and nothing of the key runs; a dead head keeps the key held.
    UPDATE jobs SET blocked = false
    WHERE id = (SELECT h.id FROM (SELECT o.id, o.state, o.blocked FROM jobs o
                                  WHERE o.ordering_key = p_key
                                    AND o.state IN ('pending', 'running', 'dead')
                                  ORDER BY o.id LIMIT 1) h
                WHERE h.state = 'pending' AND h.blocked)
      AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.ordering_key = p_key AND o.state = 'running');
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

CREATE FUNCTION release_concurrency_key(p_key text, p_queue text, p_unlimited integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    lim integer;
    free integer;
BEGIN
    -- As many flagged jobs as the key has free slots (its own limit, else its queue's key
    -- limit, else p_unlimited), counting the unflagged ones already waiting.
    lim := (SELECT max_running FROM key_limits WHERE key = p_key);
    IF lim IS NULL THEN
        lim := (SELECT key_max_running FROM queues WHERE name = p_queue);
    END IF;
    free := coalesce(lim, p_unlimited)
          - (SELECT count(*) FROM jobs WHERE state = 'running' AND concurrency_key = p_key)
          - (SELECT count(*) FROM jobs WHERE state = 'pending' AND NOT blocked AND concurrency_key = p_key);
    IF free <= 0 THEN
        RETURN 0;
    END IF;
    UPDATE jobs SET blocked = false
    WHERE id IN (SELECT b.id FROM jobs b
                 WHERE b.concurrency_key = p_key AND b.state = 'pending' AND b.blocked
                 ORDER BY b.priority, b.run_at, b.id LIMIT free
                 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION unblock_keys(p_batch integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    total integer := 0;
    r record;
BEGIN
    -- The full sweep: every kind of flagged job whose key could run now, at most p_batch
    -- keys of each kind. Recorded hand-overs go first (hand_over_keys()).
    total := hand_over_keys(p_batch);
    FOR r IN SELECT DISTINCT ordering_key AS key FROM jobs
             WHERE state = 'pending' AND blocked AND ordering_key IS NOT NULL LIMIT p_batch LOOP
        total := total + release_ordering_key(r.key);
    END LOOP;
    FOR r IN SELECT DISTINCT ON (concurrency_key) concurrency_key AS key, queue FROM jobs
             WHERE state = 'pending' AND blocked AND concurrency_key IS NOT NULL
             ORDER BY concurrency_key LIMIT p_batch LOOP
        total := total + release_concurrency_key(r.key, r.queue, p_batch);
    END LOOP;
    RETURN total;
END
$$;

CREATE FUNCTION hand_over_keys(p_batch integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    total integer := 0;
    r record;
BEGIN
    -- The rows read here committed before this statement, so the releases below (later
    -- snapshots) see the jobs that finished; only those rows are deleted.
    FOR r IN SELECT h.key, min(h.queue) AS queue, array_agg(h.id) AS ids
             FROM (SELECT k.id, k.key, k.queue FROM key_handovers k
                   ORDER BY k.id LIMIT greatest(p_batch, 1)
                   FOR UPDATE SKIP LOCKED) h
             GROUP BY h.key LOOP
        -- The key's lock as a finishing job takes it (shared, never waited for long): held
        -- by a claim, the claim commits first and the next pass sees what it flagged.
        CONTINUE WHEN NOT lock_briefly(lock_space('key'), hashtext(r.key), true, 20);
        IF left(r.key, 2) = 'o:' THEN
            total := total + release_ordering_key(substr(r.key, 3));
        ELSE
            total := total + release_concurrency_key(substr(r.key, 3), r.queue, greatest(p_batch, 1));
        END IF;
        DELETE FROM key_handovers WHERE id = ANY (r.ids);
    END LOOP;
    RETURN total;
END
$$;

CREATE OR REPLACE FUNCTION jobs_release_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- The state the job ended in: a deleted running row (there is no NEW row to read) ended
    -- as a success would have.
    v_state text := 'succeeded';
    -- Whether the next job was unflagged here (FOUND would carry over between the branches).
    v_done boolean;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_state := NEW.state;
    END IF;
    IF OLD.ordering_key IS NOT NULL AND v_state IN ('succeeded', 'cancelled') THEN
        v_done := false;
        -- Not a wait: a key whose lock or next row cannot be had at once is recorded for
        -- hand_over_keys(), so a connection holding the key's lock never holds a completion.
        -- Without the lock the record is unconditional: the holder may be a claim flagging
        -- the next job right now, a write this transaction cannot see.
        IF lock_briefly(lock_space('key'), hashtext('o:' || OLD.ordering_key), true, 20) THEN
            UPDATE jobs SET blocked = false
            WHERE id = (SELECT id FROM jobs
                        WHERE ordering_key = OLD.ordering_key AND state = 'pending' AND blocked
                        ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
            -- Nothing unflagged: none flagged, or the next one's row was busy.
            v_done := FOUND OR NOT EXISTS (SELECT 1 FROM jobs WHERE ordering_key = OLD.ordering_key
                                             AND state = 'pending' AND blocked);
        END IF;
        IF NOT v_done THEN
            INSERT INTO key_handovers (key, queue) VALUES ('o:' || OLD.ordering_key, OLD.queue);
        END IF;
    END IF;
    IF OLD.concurrency_key IS NOT NULL AND OLD.state = 'running' THEN
        v_done := false;
        IF lock_briefly(lock_space('key'), hashtext('c:' || OLD.concurrency_key), true, 20) THEN
            UPDATE jobs SET blocked = false
            WHERE id = (SELECT id FROM jobs
                        WHERE concurrency_key = OLD.concurrency_key AND state = 'pending' AND blocked
                        ORDER BY priority, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED);
            -- Nothing unflagged: none flagged, or the next one's row was busy.
            v_done := FOUND OR NOT EXISTS (SELECT 1 FROM jobs WHERE concurrency_key = OLD.concurrency_key
                                             AND state = 'pending' AND blocked);
        END IF;
        IF NOT v_done THEN
            INSERT INTO key_handovers (key, queue) VALUES ('c:' || OLD.concurrency_key, OLD.queue);
        END IF;
    END IF;
    -- Workers no longer buffer keyed work (it is claimed only for free slots), so a key that
    -- frees up must wake them: one hint per queue and transaction (the server folds repeats).
    PERFORM pg_notify(current_schema() || '_wakeup', OLD.queue);
    RETURN NULL;
END
$$;

-- Definers with a pinned path, like every writer of jobs (migration 0016): the trigger
-- writes key_handovers whoever's write fired it, and no role but the owner writes that
-- table directly (`docket grant` revokes it from the worker).
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'release_ordering_key(text)',
        'release_concurrency_key(text, text, integer)',
        'hand_over_keys(integer)',
        'unblock_keys(integer)',
        'jobs_release_keys()'
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
REVOKE ALL ON key_handovers FROM PUBLIC;
REVOKE ALL ON SEQUENCE key_handovers_id_seq FROM PUBLIC;
