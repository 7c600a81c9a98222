-- Migration 0031: batches — a set of jobs, added to until closed, whose callback jobs are
-- enqueued once every member has ended.
--
-- A batch is a workflow without edges: its members are nodes named #1, #2, … in the order
-- they were added, so they are claimed, completed (complete_nodes_fenced), reaped,
-- cancelled, retried, shown and pruned as nodes are. What is new:
-- * workflows.callbacks: NULL for a graph; for a batch its callback jobs by occasion
--   ({"on_success": job, "on_complete": job, "on_failure": job}, each optional), checked by
--   a trial insert when the batch is opened, so enqueuing one later cannot fail.
-- * workflows.closed_at / ended_at and the counters unfinished, succeeded, dead, cancelled;
--   on_*_job: each callback's job once it fired.
-- * jobs.batch_id: a member's batch (NULL for every other job, so the trigger
--   jobs_batch_tally's WHEN is false for them and they pay nothing). The trigger keeps the
--   counters on every path that moves a member into or out of an end state (completion,
--   failure, the reaper, cancel, retry, skip, a delete) and then runs batch_settle().
-- * batch_settle(): once the batch is closed and no member is unfinished, each callback
--   whose occasion holds and which has not fired is enqueued and its id recorded — under
--   the batch row's lock (the counters' UPDATE took it), so each fires at most once:
--   on_complete at the first settle, on_failure at the first settle with a member dead or
--   cancelled, on_success at the first settle with every member succeeded (perhaps after an
--   operator retried the failures).
-- * batch_open(), batch_add(), batch_close(): the SQL API, granted like enqueue.
-- * prune_workflows() redefined: an open batch is kept whatever it holds.
-- * skip_edge(): an operator satisfies a `hold` edge whose parent ended without success.
--
-- Additive: new nullable or defaulted columns; the workflows.nodes CHECK is replaced by a
-- looser one (a batch may be opened empty and hold up to 100,000 members).

ALTER TABLE workflows ADD COLUMN callbacks jsonb;
ALTER TABLE workflows ADD COLUMN closed_at timestamptz;
ALTER TABLE workflows ADD COLUMN ended_at timestamptz;
ALTER TABLE workflows ADD COLUMN unfinished integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN succeeded integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN dead integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN cancelled integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN on_success_job bigint;
ALTER TABLE workflows ADD COLUMN on_complete_job bigint;
ALTER TABLE workflows ADD COLUMN on_failure_job bigint;
ALTER TABLE workflows DROP CONSTRAINT workflows_nodes_check;
ALTER TABLE workflows ADD CONSTRAINT workflows_nodes_check
    CHECK (nodes BETWEEN 0 AND 100000) NOT VALID;
-- The batches list (newest first) without reading graphs' rows.
CREATE INDEX workflows_batches_idx ON workflows (id) WHERE callbacks IS NOT NULL;

ALTER TABLE jobs ADD COLUMN batch_id bigint;

-- One job of a batch (a member when p_node is given, else a callback), from its JSON spec:
-- the fields checked here, the rest by the table's own rules on insert. Raises
-- invalid_parameter_value naming p_what.
CREATE FUNCTION batch_job_insert(p_job jsonb, p_what text, p_meta jsonb, p_batch bigint,
    p_node text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key text;
    v_id bigint;
    v_bad text := 'invalid_parameter_value';
BEGIN
    IF jsonb_typeof(p_job) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'batch refused: %: a job is a JSON object', p_what USING ERRCODE = v_bad;
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_job) LOOP
        IF v_key NOT IN ('queue', 'kind', 'args', 'metadata', 'priority', 'max_attempts',
                         'backoff_base_ms', 'backoff_cap_ms') THEN
            RAISE EXCEPTION 'batch refused: %: unknown field %', p_what, quote_literal(v_key)
                USING ERRCODE = v_bad;
        END IF;
    END LOOP;
    IF jsonb_typeof(coalesce(p_job->'queue', '"default"')) <> 'string'
       OR coalesce(p_job->>'queue', 'default') !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'batch refused: %: invalid queue name: use 1-64 characters from A-Z a-z 0-9 _ . -',
            p_what USING ERRCODE = v_bad;
    END IF;
    IF jsonb_typeof(p_job->'kind') IS DISTINCT FROM 'string'
       OR (p_job->>'kind') !~ '^[A-Za-z0-9_.:/-]{1,128}$' THEN
        RAISE EXCEPTION 'batch refused: %: invalid kind: use 1-128 characters from A-Z a-z 0-9 _ . : / -',
            p_what USING ERRCODE = v_bad;
    END IF;
    IF p_job ? 'metadata' AND (jsonb_typeof(p_job->'metadata') <> 'object'
                               OR (p_job->'metadata') ? 'docket:workflow'
                               OR (p_job->'metadata') ? 'docket:batch') THEN
        RAISE EXCEPTION 'batch refused: %: metadata must be a JSON object without the keys docket:workflow and docket:batch',
            p_what USING ERRCODE = v_bad;
    END IF;
    FOR v_key IN SELECT unnest(ARRAY['priority', 'max_attempts', 'backoff_base_ms', 'backoff_cap_ms']) LOOP
        IF p_job ? v_key AND (jsonb_typeof(p_job->v_key) <> 'number'
                              OR (p_job->>v_key) !~ '^-?[0-9]{1,12}$') THEN
            RAISE EXCEPTION 'batch refused: %: % must be an integer', p_what, v_key
                USING ERRCODE = v_bad;
        END IF;
    END LOOP;
    IF coalesce((p_job->>'priority')::bigint, 0) NOT BETWEEN -100 AND 100 THEN
        RAISE EXCEPTION 'batch refused: %: priority % is out of range -100..=100', p_what,
            p_job->>'priority' USING ERRCODE = v_bad;
    END IF;
    IF coalesce((p_job->>'max_attempts')::bigint, 25) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'batch refused: %: max_attempts % is out of range 1..=1000', p_what,
            p_job->>'max_attempts' USING ERRCODE = v_bad;
    END IF;
    INSERT INTO jobs (queue, kind, args, priority, max_attempts, metadata, backoff_base_ms,
                      backoff_cap_ms, state, workflow_id, node, deps_waiting, batch_id)
    VALUES (coalesce(p_job->>'queue', 'default'), p_job->>'kind',
            coalesce(p_job->'args', '{}'::jsonb),
            coalesce((p_job->>'priority')::integer, 0)::smallint,
            coalesce((p_job->>'max_attempts')::integer, 25),
            coalesce(p_job->'metadata', '{}'::jsonb) || p_meta,
            (p_job->>'backoff_base_ms')::bigint, (p_job->>'backoff_cap_ms')::bigint,
            'pending', CASE WHEN p_node IS NOT NULL THEN p_batch END, p_node,
            CASE WHEN p_node IS NOT NULL THEN 0 END,
            CASE WHEN p_node IS NOT NULL THEN p_batch END)
    RETURNING id INTO v_id;
    PERFORM pg_notify(current_schema() || '_wakeup', coalesce(p_job->>'queue', 'default'));
    RETURN v_id;
END
$$;

-- Enqueues the callbacks due for batch p_batch, each once. The caller holds the batch row's
-- lock (the counters' UPDATE, or batch_close()'s).
CREATE FUNCTION batch_settle(p_batch bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    w record;
    v_cb text;
    v_job bigint;
    v_failed boolean;
BEGIN
    SELECT * INTO w FROM workflows WHERE id = p_batch AND callbacks IS NOT NULL;
    IF NOT FOUND OR w.closed_at IS NULL OR w.unfinished > 0 THEN
        RETURN;
    END IF;
    IF w.ended_at IS NULL THEN
        UPDATE workflows SET ended_at = now() WHERE id = p_batch;
    END IF;
    v_failed := w.dead + w.cancelled > 0;
    FOREACH v_cb IN ARRAY ARRAY['on_complete', 'on_failure', 'on_success'] LOOP
        CONTINUE WHEN NOT w.callbacks ? v_cb;
        CONTINUE WHEN v_cb = 'on_failure' AND NOT v_failed;
        CONTINUE WHEN v_cb = 'on_success' AND v_failed;
        -- Once each: a callback that fired is never enqueued again.
        CONTINUE WHEN CASE v_cb WHEN 'on_complete' THEN w.on_complete_job
                                WHEN 'on_failure' THEN w.on_failure_job
                                ELSE w.on_success_job END IS NOT NULL;
        v_job := batch_job_insert(w.callbacks->v_cb, v_cb,
            jsonb_build_object('docket:batch', jsonb_build_object(
                'id', w.id, 'name', w.name, 'callback', v_cb, 'total', w.nodes,
                'succeeded', w.succeeded, 'dead', w.dead, 'cancelled', w.cancelled)),
            NULL, NULL);
        UPDATE workflows
        SET on_complete_job = CASE WHEN v_cb = 'on_complete' THEN v_job ELSE on_complete_job END,
            on_failure_job = CASE WHEN v_cb = 'on_failure' THEN v_job ELSE on_failure_job END,
            on_success_job = CASE WHEN v_cb = 'on_success' THEN v_job ELSE on_success_job END
        WHERE id = p_batch;
    END LOOP;
END
$$;

CREATE FUNCTION jobs_batch_tally()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_batch bigint;
    v_from text;
    v_to text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A running member deleted is one completed by delete; an unfinished one removed
        -- counts as cancelled.
        v_batch := OLD.batch_id;
        v_to := CASE WHEN OLD.state = 'running' THEN 'succeeded' ELSE 'cancelled' END;
    ELSE
        v_batch := NEW.batch_id;
        v_from := CASE WHEN OLD.state IN ('succeeded', 'dead', 'cancelled') THEN OLD.state END;
        v_to := CASE WHEN NEW.state IN ('succeeded', 'dead', 'cancelled') THEN NEW.state END;
    END IF;
    UPDATE workflows
    SET unfinished = unfinished + (v_from IS NOT NULL)::integer - (v_to IS NOT NULL)::integer,
        succeeded = succeeded + (v_to IS NOT DISTINCT FROM 'succeeded')::integer
                              - (v_from IS NOT DISTINCT FROM 'succeeded')::integer,
        dead = dead + (v_to IS NOT DISTINCT FROM 'dead')::integer
                    - (v_from IS NOT DISTINCT FROM 'dead')::integer,
        cancelled = cancelled + (v_to IS NOT DISTINCT FROM 'cancelled')::integer
                              - (v_from IS NOT DISTINCT FROM 'cancelled')::integer,
        ended_at = CASE WHEN v_to IS NULL THEN NULL ELSE ended_at END
    WHERE id = v_batch;
    PERFORM batch_settle(v_batch);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_batch_tally AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (old.batch_id IS NOT NULL AND old.state IS DISTINCT FROM new.state
          AND (old.state IN ('succeeded', 'dead', 'cancelled')
               OR new.state IN ('succeeded', 'dead', 'cancelled')))
    EXECUTE FUNCTION jobs_batch_tally();
CREATE TRIGGER jobs_batch_deleted AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (old.batch_id IS NOT NULL AND old.state IN ('waiting', 'pending', 'running'))
    EXECUTE FUNCTION jobs_batch_tally();

-- Members added to open batch p_batch, in order; the batch row locked for the count.
CREATE FUNCTION batch_add(p_batch bigint, p_jobs jsonb)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    w record;
    v_n integer;
    v_i integer;
    v_ids bigint[] := '{}';
BEGIN
    IF jsonb_typeof(p_jobs) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'batch refused: the jobs must be a JSON array'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT id, nodes, closed_at, callbacks INTO w FROM workflows WHERE id = p_batch FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'batch % not found', p_batch USING ERRCODE = 'no_data_found';
    ELSIF w.callbacks IS NULL THEN
        RAISE EXCEPTION 'workflow % is not a batch', p_batch USING ERRCODE = 'wrong_object_type';
    ELSIF w.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'batch % is closed: nothing can be added to it', p_batch
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    v_n := jsonb_array_length(p_jobs);
    IF w.nodes + v_n > 100000 THEN
        RAISE EXCEPTION 'batch refused: % members, over the limit of 100000 per batch',
            w.nodes + v_n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        v_ids := v_ids || batch_job_insert(p_jobs->(v_i - 1), 'job #' || (v_i - 1),
            jsonb_build_object('docket:workflow', jsonb_build_object(
                'id', p_batch, 'node', '#' || (w.nodes + v_i), 'batch', true)),
            p_batch, '#' || (w.nodes + v_i));
    END LOOP;
    UPDATE workflows SET nodes = nodes + v_n, unfinished = unfinished + v_n,
                         ended_at = CASE WHEN v_n > 0 THEN NULL ELSE ended_at END
    WHERE id = p_batch;
    RETURN v_ids;
END
$$;

-- Closes batch p_batch (again: nothing changes) and settles it if nothing is unfinished.
CREATE FUNCTION batch_close(p_batch bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    w record;
BEGIN
    SELECT id, callbacks INTO w FROM workflows WHERE id = p_batch FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'batch % not found', p_batch USING ERRCODE = 'no_data_found';
    ELSIF w.callbacks IS NULL THEN
        RAISE EXCEPTION 'workflow % is not a batch', p_batch USING ERRCODE = 'wrong_object_type';
    END IF;
    UPDATE workflows SET closed_at = coalesce(closed_at, now()) WHERE id = p_batch;
    PERFORM batch_settle(p_batch);
END
$$;

-- Opens a batch: its row, its callbacks (each checked by a trial insert undone at once, so
-- the table's own rules judge them now rather than when the last member ends), its first
-- members, and its close when p_close. Returns the batch's id and the members' jobs.
CREATE FUNCTION batch_open(p_name text, p_callbacks jsonb, p_jobs jsonb, p_close boolean)
RETURNS TABLE (batch_id bigint, job_ids bigint[])
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key text;
    v_id bigint;
    v_ids bigint[];
    v_bad text := 'invalid_parameter_value';
BEGIN
    IF p_name IS NULL OR octet_length(p_name) NOT BETWEEN 1 AND 128 OR p_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'batch refused: invalid batch name: use 1-128 bytes without control characters'
            USING ERRCODE = v_bad;
    END IF;
    IF jsonb_typeof(coalesce(p_callbacks, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'batch refused: the callbacks must be a JSON object' USING ERRCODE = v_bad;
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(coalesce(p_callbacks, '{}')) LOOP
        IF v_key NOT IN ('on_success', 'on_complete', 'on_failure') THEN
            RAISE EXCEPTION 'batch refused: unknown callback % (on_success, on_complete or on_failure)',
                quote_literal(v_key) USING ERRCODE = v_bad;
        END IF;
        BEGIN
            PERFORM batch_job_insert(p_callbacks->v_key, v_key, '{}', NULL, NULL);
            RAISE EXCEPTION 'trial insert undone' USING ERRCODE = 'DKTRY';
        EXCEPTION
            WHEN SQLSTATE 'DKTRY' THEN NULL;
            WHEN check_violation OR numeric_value_out_of_range THEN
                RAISE EXCEPTION 'batch refused: %: %', v_key, SQLERRM USING ERRCODE = v_bad;
        END;
    END LOOP;
    INSERT INTO workflows (name, nodes, callbacks)
    VALUES (p_name, 0, coalesce(p_callbacks, '{}'))
    RETURNING id INTO v_id;
    v_ids := batch_add(v_id, coalesce(p_jobs, '[]'));
    IF p_close THEN
        PERFORM batch_close(v_id);
    END IF;
    RETURN QUERY SELECT v_id, v_ids;
END
$$;

-- prune_workflows() (migration 0030) keeps an open batch, even one with no member left
-- (its members pruned, or none added yet): the application may still add to it.
CREATE OR REPLACE FUNCTION prune_workflows(p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    WITH doomed AS (
        SELECT d.parent_id, d.child_id
        FROM job_deps AS d
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = d.child_id)
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM job_deps AS d USING doomed
        WHERE d.parent_id = doomed.parent_id AND d.child_id = doomed.child_id
        RETURNING 1
    ), empty AS (
        SELECT w.id
        FROM workflows AS w
        WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.workflow_id = w.id)
          AND w.created_at < now() - interval '1 minute'
          AND (w.callbacks IS NULL OR w.closed_at IS NOT NULL)
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone_workflows AS (
        DELETE FROM workflows AS w USING empty WHERE w.id = empty.id RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_workflows)
$$;

-- An operator's skip of a held edge (workflows, migration 0030): its parent ended dead or
-- cancelled — or was pruned after it did — and the edge, on the `hold` policy, still waits.
-- It is satisfied now, once (the child's row is locked first, as every parent's end locks
-- its children first), and the child runs when its other parents allow. Returns
-- 'skipped', or why not: 'no_edge', 'consumed', or 'parent_<state>' for an unfinished
-- parent.
CREATE FUNCTION skip_edge(p_parent bigint, p_child bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_edge text;
    v_parent text;
    v_queue text;
BEGIN
    PERFORM 1 FROM jobs WHERE id = p_child FOR UPDATE;
    SELECT d.state INTO v_edge FROM job_deps AS d
    WHERE d.parent_id = p_parent AND d.child_id = p_child
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'no_edge';
    ELSIF v_edge <> 'waiting' THEN
        RETURN 'consumed';
    END IF;
    SELECT j.state INTO v_parent FROM jobs AS j WHERE j.id = p_parent;
    IF v_parent IN ('waiting', 'pending', 'running') THEN
        RETURN 'parent_' || v_parent;
    END IF;
    UPDATE job_deps SET state = 'satisfied'
    WHERE parent_id = p_parent AND child_id = p_child AND state = 'waiting';
    UPDATE jobs
    SET deps_waiting = deps_waiting - 1,
        state = CASE WHEN deps_waiting = 1 THEN 'pending' ELSE state END,
        run_at = CASE WHEN deps_waiting = 1 THEN now() ELSE run_at END
    WHERE id = p_child AND state = 'waiting'
    RETURNING CASE WHEN state = 'pending' THEN queue END INTO v_queue;
    IF v_queue IS NOT NULL THEN
        PERFORM pg_notify(current_schema() || '_wakeup', v_queue);
    END IF;
    RETURN 'skipped';
END
$$;

-- Definers with a pinned path, granted to whoever may claim (as in migration 0030); the
-- application's role (docket grant) gets batch_open/add/close as it gets enqueue.
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'batch_job_insert(jsonb, text, jsonb, bigint, text)',
        'batch_settle(bigint)',
        'jobs_batch_tally()',
        'batch_add(bigint, jsonb)',
        'batch_close(bigint)',
        'batch_open(text, jsonb, jsonb, boolean)',
        'prune_workflows(bigint)',
        'skip_edge(bigint, bigint)'
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
