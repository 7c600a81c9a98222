-- Migration 0030: workflows — graphs of jobs whose nodes wait for their parents.
--
-- * workflows: one row per enqueued graph (its name and size).
-- * jobs.workflow_id / jobs.node: a node's workflow and its name in it (both NULL for a plain
--   job); jobs.deps_waiting: the edges into it not yet consumed. A node with parents is
--   enqueued in the new state 'waiting': outside every claim index (they are all partial on
--   state = 'pending'), so a claim never walks past it.
-- * job_deps: one row per edge (parent, child) with the child's policy should the parent end
--   without success. An edge is consumed once — 'waiting' to 'satisfied' or 'failed' — and
--   only by the transaction in which its parent's row reached a terminal state, so a stale
--   attempt, whose fenced write changes no row, consumes nothing.
-- * workflow_resolve(): the rule, run by the trigger jobs_workflow_ended in the transaction
--   that ends a node (any path: completion, failure, the reaper, an operator's cancel,
--   a completion by delete). Plain jobs pay nothing: the trigger's WHEN is false for them.
-- * enqueue_workflow(jsonb): the graph from SQL, checked here — the library checks it first
--   for typed errors, but SQL callers reach this function without it.
-- * complete_nodes_fenced(): the completion the runtime sends workflow nodes to; it locks
--   the children of the whole batch in id order before ending any parent, so concurrent
--   batches of parents take shared children in one order (no deadlock), and resolves the
--   batch's edges in three set-based statements instead of the trigger's row-by-row loop.
--
-- Additive: the two state CHECKs are replaced by looser ones (NOT VALID: every existing row
-- passes the old, stricter ones), the new columns are NULL for existing rows.

CREATE TABLE workflows (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 128),
    nodes      integer     NOT NULL CHECK (nodes BETWEEN 1 AND 20000),
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN workflow_id bigint;
ALTER TABLE jobs ADD COLUMN node text;
ALTER TABLE jobs ADD COLUMN deps_waiting integer;
ALTER TABLE jobs ADD CONSTRAINT jobs_node_named
    CHECK ((workflow_id IS NULL) = (node IS NULL)) NOT VALID;
ALTER TABLE jobs ADD CONSTRAINT jobs_waiting_has_parents
    CHECK (state <> 'waiting' OR (workflow_id IS NOT NULL AND deps_waiting > 0)) NOT VALID;
ALTER TABLE jobs DROP CONSTRAINT jobs_state_valid;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_valid
    CHECK (state IN ('waiting', 'pending', 'running', 'succeeded', 'dead', 'cancelled')) NOT VALID;
-- A workflow's nodes by name (dependency outputs, the workflow's state).
CREATE INDEX jobs_workflow_idx ON jobs (workflow_id, node) WHERE workflow_id IS NOT NULL;

CREATE TABLE job_deps (
    parent_id   bigint NOT NULL,
    child_id    bigint NOT NULL,
    workflow_id bigint NOT NULL,
    on_failure  text   NOT NULL CHECK (on_failure IN ('cancel', 'ignore', 'hold')),
    state       text   NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'satisfied', 'failed')),
    PRIMARY KEY (parent_id, child_id)
);
-- A child's parents (dependency outputs, why).
CREATE INDEX job_deps_child_idx ON job_deps (child_id);
-- A workflow's edges (its page).
CREATE INDEX job_deps_workflow_idx ON job_deps (workflow_id);

CREATE FUNCTION workflow_resolve(p_parent bigint, p_state text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    -- A worklist rather than recursion: a cancelled child's own children are resolved in
    -- this loop (a chain of a thousand nodes must not nest a thousand triggers deep).
    v_ids bigint[] := ARRAY[p_parent];
    v_states text[] := ARRAY[p_state];
    v_at integer := 1;
    v_parent bigint;
    v_state text;
    v_node text;
    v_queue text;
    e record;
BEGIN
    WHILE v_at <= cardinality(v_ids) LOOP
        v_parent := v_ids[v_at];
        v_state := v_states[v_at];
        v_at := v_at + 1;
        IF v_state NOT IN ('succeeded', 'dead', 'cancelled') THEN
            CONTINUE;
        END IF;
        SELECT j.node INTO v_node FROM jobs AS j WHERE j.id = v_parent;
        v_node := coalesce(v_node, v_parent::text);
        -- Each edge once: only edges still waiting, locked with their children in id order.
        FOR e IN
            SELECT d.child_id, d.on_failure
            FROM job_deps AS d
            WHERE d.parent_id = v_parent AND d.state = 'waiting'
            ORDER BY d.child_id
            FOR UPDATE
        LOOP
            IF v_state = 'succeeded' OR e.on_failure = 'ignore' THEN
                UPDATE job_deps SET state = 'satisfied'
                WHERE parent_id = v_parent AND child_id = e.child_id;
                UPDATE jobs
                SET deps_waiting = deps_waiting - 1,
                    state = CASE WHEN deps_waiting = 1 THEN 'pending' ELSE state END,
                    run_at = CASE WHEN deps_waiting = 1 THEN now() ELSE run_at END
                WHERE id = e.child_id AND state = 'waiting'
                RETURNING CASE WHEN state = 'pending' THEN queue END INTO v_queue;
                IF v_queue IS NOT NULL THEN
                    -- Ready now: a hint to the queue's idle workers, delivered at commit.
                    PERFORM pg_notify(current_schema() || '_wakeup', v_queue);
                END IF;
            ELSIF e.on_failure = 'cancel' THEN
                UPDATE job_deps SET state = 'failed'
                WHERE parent_id = v_parent AND child_id = e.child_id;
                UPDATE jobs
                SET state = 'cancelled', finished_at = now(),
                    errors = push_error(errors, jsonb_build_object(
                        'attempt', attempt - released, 'at', now(), 'class', 'dependency',
                        'message', format('cancelled: its parent %s ended %s', v_node, v_state)))
                WHERE id = e.child_id AND state = 'waiting';
                IF FOUND THEN
                    v_ids := v_ids || e.child_id;
                    v_states := v_states || 'cancelled'::text;
                END IF;
            END IF;
            -- 'hold': the edge stays waiting; the child waits for the parent's retry.
        END LOOP;
    END LOOP;
END
$$;

CREATE FUNCTION jobs_workflow_ended()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A running node deleted is one completed by delete; an unfinished one removed
        -- (its queue removed) ends as a cancellation for its children.
        PERFORM workflow_resolve(OLD.id,
            CASE WHEN OLD.state = 'running' THEN 'succeeded' ELSE 'cancelled' END);
        RETURN OLD;
    END IF;
    PERFORM workflow_resolve(NEW.id, NEW.state);
    RETURN NEW;
END
$$;

-- pg_trigger_depth() = 0: a cancellation written by workflow_resolve itself is resolved by
-- its worklist, not by a nested trigger. docket.nodes_batch: complete_nodes_fenced() resolves
-- its own batch set-based (it sets the flag for its one UPDATE, transaction-local).
CREATE TRIGGER jobs_workflow_ended AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (old.workflow_id IS NOT NULL AND old.state IS DISTINCT FROM new.state
          AND new.state IN ('succeeded', 'dead', 'cancelled') AND pg_trigger_depth() = 0
          AND current_setting('docket.nodes_batch', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION jobs_workflow_ended();
CREATE TRIGGER jobs_workflow_deleted AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (old.workflow_id IS NOT NULL AND old.state IN ('waiting', 'pending', 'running')
          AND pg_trigger_depth() = 0)
    EXECUTE FUNCTION jobs_workflow_ended();

CREATE FUNCTION complete_nodes_fenced(p_ids bigint[], p_attempts integer[], p_outputs jsonb[],
    p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_done bigint[];
    v_attempts integer[];
    v_woken integer;
BEGIN
    -- The children of the whole batch first, in id order: every transaction that ends
    -- parents takes their shared children in one order.
    PERFORM 1 FROM jobs AS c
    WHERE c.id IN (SELECT d.child_id FROM job_deps AS d
                   WHERE d.parent_id = ANY (p_ids) AND d.state = 'waiting')
    ORDER BY c.id
    FOR UPDATE;
    -- complete_output_fenced()'s fence and write (migration 0018), the output optional. The
    -- batch's edges are consumed below in three statements for the whole batch, rather than
    -- row by row by the trigger, which this setting keeps quiet for this statement only.
    PERFORM set_config('docket.nodes_batch', 'on', true);
    WITH done AS (
        UPDATE jobs AS j
        SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(),
            lease_owner = NULL, lease_expires_at = NULL, output = c.output
        FROM unnest(p_ids, p_attempts, p_outputs) AS c(id, attempt, output)
        WHERE j.id = c.id
          AND j.attempt = c.attempt
          AND coalesce(TRUE
          AND j.lease_owner = p_owner
          AND j.lease_expires_at > statement_timestamp(), false)
        RETURNING j.id, j.attempt
    )
    SELECT coalesce(array_agg(d.id), '{}'), coalesce(array_agg(d.attempt), '{}')
    INTO v_done, v_attempts FROM done AS d;
    PERFORM set_config('docket.nodes_batch', 'off', true);
    PERFORM pg_notify(current_schema() || '_done', x::text) FROM unnest(v_done) AS x;
    -- workflow_resolve() for a success, set-based: each edge of a node that succeeded here
    -- and is still waiting is consumed once; a child whose count reaches zero is pending,
    -- due now, and its queue's workers are woken at commit.
    WITH consumed AS (
        UPDATE job_deps AS d SET state = 'satisfied'
        WHERE d.parent_id = ANY (v_done) AND d.state = 'waiting'
        RETURNING d.child_id
    ), counts AS (
        SELECT child_id, count(*)::integer AS n FROM consumed GROUP BY child_id
    ), ready AS (
        UPDATE jobs AS c
        SET state = CASE WHEN c.deps_waiting = k.n THEN 'pending' ELSE c.state END,
            run_at = CASE WHEN c.deps_waiting = k.n THEN now() ELSE c.run_at END,
            deps_waiting = c.deps_waiting - k.n
        FROM counts AS k
        WHERE c.id = k.child_id AND c.state = 'waiting'
        RETURNING c.state, c.queue
    )
    SELECT count(*) INTO v_woken
    FROM (SELECT pg_notify(current_schema() || '_wakeup', r.queue)
          FROM (SELECT DISTINCT queue FROM ready WHERE state = 'pending') AS r) AS w;
    RETURN QUERY SELECT x.id, x.attempt FROM unnest(v_done, v_attempts) AS x(id, attempt);
END
$$;

-- The graph's check and write, for a new workflow (p_parent NULL) or spawned into the
-- workflow p_wf by its running node p_parent: then every root of the graph runs after the
-- parent, and the parent's dependents still waiting also wait for every sink of the graph
-- (so what came after the parent comes after what it spawned).
CREATE FUNCTION enqueue_graph(p_graph jsonb, p_parent bigint, p_wf bigint)
RETURNS TABLE (workflow_id bigint, node text, job_id bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_sink boolean[];
    v_name text;
    v_nodes jsonb;
    v_n integer;
    v_names text[] := '{}';
    v_index jsonb;
    v_start integer[];
    v_kids integer[];
    v_node jsonb;
    v_dep jsonb;
    v_parent text;
    v_policy text;
    v_key text;
    v_i integer;
    v_k integer;
    v_p integer;
    -- Edges as parallel arrays of node positions (1-based) and policies.
    v_from integer[] := '{}';
    v_to integer[] := '{}';
    v_pol text[] := '{}';
    v_indeg integer[];
    v_seen integer[];
    v_order integer[] := '{}';
    v_at integer := 1;
    v_wf bigint;
    v_ids bigint[];
    v_args jsonb;
    v_meta jsonb;
    v_prio integer;
    v_max integer;
    v_base bigint;
    v_cap bigint;
    v_bad text := 'invalid_parameter_value';
BEGIN
    IF p_graph IS NULL OR jsonb_typeof(p_graph) <> 'object' THEN
        RAISE EXCEPTION 'workflow refused: the graph must be a JSON object'
            USING ERRCODE = v_bad;
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_graph) LOOP
        IF v_key NOT IN ('name', 'nodes') THEN
            RAISE EXCEPTION 'workflow refused: unknown field % in the graph', quote_literal(v_key)
                USING ERRCODE = v_bad;
        END IF;
    END LOOP;
    v_name := p_graph->>'name';
    IF jsonb_typeof(p_graph->'name') IS DISTINCT FROM 'string'
       OR octet_length(v_name) NOT BETWEEN 1 AND 128 OR v_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'workflow refused: invalid workflow name: use 1-128 bytes without control characters'
            USING ERRCODE = v_bad;
    END IF;
    v_nodes := p_graph->'nodes';
    IF jsonb_typeof(v_nodes) IS DISTINCT FROM 'array' OR jsonb_array_length(v_nodes) = 0 THEN
        RAISE EXCEPTION 'workflow refused: a workflow needs at least one node' USING ERRCODE = v_bad;
    END IF;
    v_n := jsonb_array_length(v_nodes);
    IF v_n > 20000 THEN
        RAISE EXCEPTION 'workflow refused: % nodes, over the limit of 20000', v_n USING ERRCODE = v_bad;
    END IF;
    -- Names and fields.
    FOR v_i IN 1 .. v_n LOOP
        v_node := v_nodes->(v_i - 1);
        IF jsonb_typeof(v_node) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'workflow refused: node #% is not a JSON object', v_i - 1 USING ERRCODE = v_bad;
        END IF;
        IF jsonb_typeof(v_node->'name') IS DISTINCT FROM 'string'
           OR octet_length(v_node->>'name') NOT BETWEEN 1 AND 128 OR (v_node->>'name') ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'workflow refused: invalid node name in node #%: use 1-128 bytes without control characters', v_i - 1
                USING ERRCODE = v_bad;
        END IF;
        v_names := v_names || (v_node->>'name');
        FOR v_key IN SELECT jsonb_object_keys(v_node) LOOP
            IF v_key NOT IN ('name', 'queue', 'kind', 'args', 'metadata', 'priority', 'max_attempts',
                             'backoff_base_ms', 'backoff_cap_ms', 'after') THEN
                RAISE EXCEPTION 'workflow refused: node %: unknown field %',
                    quote_literal(v_node->>'name'), quote_literal(v_key) USING ERRCODE = v_bad;
            END IF;
        END LOOP;
        IF coalesce(v_node->>'queue', 'default') !~ '^[A-Za-z0-9_.-]{1,64}$'
           OR jsonb_typeof(coalesce(v_node->'queue', '"default"')) <> 'string' THEN
            RAISE EXCEPTION 'workflow refused: node %: invalid queue name: use 1-64 characters from A-Z a-z 0-9 _ . -',
                quote_literal(v_node->>'name') USING ERRCODE = v_bad;
        END IF;
        IF jsonb_typeof(v_node->'kind') IS DISTINCT FROM 'string'
           OR (v_node->>'kind') !~ '^[A-Za-z0-9_.:/-]{1,128}$' THEN
            RAISE EXCEPTION 'workflow refused: node %: invalid kind: use 1-128 characters from A-Z a-z 0-9 _ . : / -',
                quote_literal(v_node->>'name') USING ERRCODE = v_bad;
        END IF;
        IF v_node ? 'metadata' AND (jsonb_typeof(v_node->'metadata') <> 'object'
                                    OR (v_node->'metadata') ? 'docket:workflow') THEN
            RAISE EXCEPTION 'workflow refused: node %: metadata must be a JSON object without the key docket:workflow',
                quote_literal(v_node->>'name') USING ERRCODE = v_bad;
        END IF;
        FOR v_key IN SELECT unnest(ARRAY['priority', 'max_attempts', 'backoff_base_ms', 'backoff_cap_ms']) LOOP
            IF v_node ? v_key AND (jsonb_typeof(v_node->v_key) <> 'number'
                                   OR (v_node->>v_key) !~ '^-?[0-9]{1,12}$') THEN
                RAISE EXCEPTION 'workflow refused: node %: % must be an integer',
                    quote_literal(v_node->>'name'), v_key USING ERRCODE = v_bad;
            END IF;
        END LOOP;
        IF coalesce((v_node->>'priority')::bigint, 0) NOT BETWEEN -100 AND 100 THEN
            RAISE EXCEPTION 'workflow refused: node %: priority % is out of range -100..=100',
                quote_literal(v_node->>'name'), v_node->>'priority' USING ERRCODE = v_bad;
        END IF;
        IF coalesce((v_node->>'max_attempts')::bigint, 25) NOT BETWEEN 1 AND 1000 THEN
            RAISE EXCEPTION 'workflow refused: node %: max_attempts % is out of range 1..=1000',
                quote_literal(v_node->>'name'), v_node->>'max_attempts' USING ERRCODE = v_bad;
        END IF;
        IF v_node ? 'after' AND jsonb_typeof(v_node->'after') <> 'array' THEN
            RAISE EXCEPTION 'workflow refused: node %: after must be an array',
                quote_literal(v_node->>'name') USING ERRCODE = v_bad;
        END IF;
    END LOOP;
    SELECT n INTO v_parent FROM unnest(v_names) WITH ORDINALITY AS x(n, i)
    GROUP BY n HAVING count(*) > 1 ORDER BY min(i) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'workflow refused: node % is defined twice', quote_literal(v_parent)
            USING ERRCODE = v_bad;
    END IF;
    -- Name to position, a binary search per lookup (the graph may hold 100,000 edges).
    SELECT jsonb_object_agg(n, i) INTO v_index FROM unnest(v_names) WITH ORDINALITY AS x(n, i);
    -- Edges.
    FOR v_i IN 1 .. v_n LOOP
        v_node := v_nodes->(v_i - 1);
        FOR v_dep IN SELECT jsonb_array_elements(coalesce(v_node->'after', '[]')) LOOP
            IF jsonb_typeof(v_dep) = 'string' THEN
                v_parent := v_dep #>> '{}';
                v_policy := 'cancel';
            ELSIF jsonb_typeof(v_dep) = 'object' AND jsonb_typeof(v_dep->'node') = 'string'
                  AND NOT EXISTS (SELECT 1 FROM jsonb_object_keys(v_dep) AS k
                                  WHERE k NOT IN ('node', 'on_failure')) THEN
                v_parent := v_dep->>'node';
                v_policy := coalesce(v_dep->>'on_failure', 'cancel');
                IF v_policy NOT IN ('cancel', 'ignore', 'hold') THEN
                    RAISE EXCEPTION 'workflow refused: node %: unknown on_failure % (cancel, ignore or hold)',
                        quote_literal(v_node->>'name'), quote_literal(v_policy) USING ERRCODE = v_bad;
                END IF;
            ELSE
                RAISE EXCEPTION 'workflow refused: node %: each entry of after is a name or {"node": name, "on_failure": policy}',
                    quote_literal(v_node->>'name') USING ERRCODE = v_bad;
            END IF;
            IF v_parent = v_node->>'name' THEN
                RAISE EXCEPTION 'workflow refused: node % depends on itself', quote_literal(v_parent)
                    USING ERRCODE = v_bad;
            END IF;
            v_p := (v_index->>v_parent)::integer;
            IF v_p IS NULL THEN
                RAISE EXCEPTION 'workflow refused: node % depends on %, which is not in the workflow',
                    quote_literal(v_node->>'name'), quote_literal(v_parent) USING ERRCODE = v_bad;
            END IF;
            IF cardinality(v_from) >= 100000 THEN
                RAISE EXCEPTION 'workflow refused: more than 100000 edges' USING ERRCODE = v_bad;
            END IF;
            v_from := v_from || v_p;
            v_to := v_to || v_i;
            v_pol := v_pol || v_policy;
        END LOOP;
    END LOOP;
    SELECT v_names[t], v_names[f] INTO v_key, v_parent FROM unnest(v_from, v_to) AS e(f, t)
    GROUP BY f, t HAVING count(*) > 1 ORDER BY min(t) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'workflow refused: node % lists % twice', quote_literal(v_key),
            quote_literal(v_parent) USING ERRCODE = v_bad;
    END IF;
    -- Cycles: Kahn's algorithm over the children of each node (edges sorted by parent,
    -- v_start[p] .. v_start[p + 1] - 1 the children of p); what is left unsorted lies on or
    -- behind a cycle.
    SELECT coalesce(array_agg(t ORDER BY f, t), '{}') INTO v_kids FROM unnest(v_from, v_to) AS e(f, t);
    v_start := array_fill(0, ARRAY[v_n + 1]);
    FOR v_k IN 1 .. cardinality(v_from) LOOP
        v_start[v_from[v_k]] := v_start[v_from[v_k]] + 1;
    END LOOP;
    v_p := 1;
    FOR v_i IN 1 .. v_n + 1 LOOP
        v_k := v_start[v_i];
        v_start[v_i] := v_p;
        v_p := v_p + v_k;
    END LOOP;
    v_indeg := array_fill(0, ARRAY[v_n]);
    FOR v_k IN 1 .. cardinality(v_to) LOOP
        v_indeg[v_to[v_k]] := v_indeg[v_to[v_k]] + 1;
    END LOOP;
    FOR v_i IN 1 .. v_n LOOP
        IF v_indeg[v_i] = 0 THEN v_order := v_order || v_i; END IF;
    END LOOP;
    WHILE v_at <= cardinality(v_order) LOOP
        v_i := v_order[v_at];
        FOR v_k IN v_start[v_i] .. v_start[v_i + 1] - 1 LOOP
            v_indeg[v_kids[v_k]] := v_indeg[v_kids[v_k]] - 1;
            IF v_indeg[v_kids[v_k]] = 0 THEN v_order := v_order || v_kids[v_k]; END IF;
        END LOOP;
        v_at := v_at + 1;
    END LOOP;
    IF cardinality(v_order) < v_n THEN
        -- Every node left has a parent left: walking parents from one of them comes back to
        -- a node already seen, which lies on the cycle.
        SELECT min(i) INTO v_i FROM generate_subscripts(v_indeg, 1) AS i WHERE v_indeg[i] > 0;
        v_seen := array_fill(0, ARRAY[v_n]);
        WHILE v_seen[v_i] = 0 LOOP
            v_seen[v_i] := 1;
            SELECT f INTO v_i FROM unnest(v_from, v_to) AS e(f, t)
            WHERE t = v_i AND v_indeg[f] > 0 LIMIT 1;
        END LOOP;
        RAISE EXCEPTION 'workflow refused: a cycle through node %', quote_literal(v_names[v_i])
            USING ERRCODE = v_bad;
    END IF;
    -- Written: the workflow (or its new nodes' count), its jobs (in the graph's order), its
    -- edges.
    IF p_parent IS NULL THEN
        INSERT INTO workflows (name, nodes) VALUES (v_name, v_n) RETURNING id INTO v_wf;
    ELSE
        v_wf := p_wf;
        IF EXISTS (SELECT 1 FROM jobs AS j WHERE j.workflow_id = v_wf AND j.node = ANY (v_names)) THEN
            RAISE EXCEPTION 'workflow refused: a spawned node is named like a node of the workflow'
                USING ERRCODE = v_bad;
        END IF;
        UPDATE workflows SET nodes = nodes + v_n WHERE id = v_wf;
    END IF;
    v_indeg := array_fill(0, ARRAY[v_n]);
    v_sink := array_fill(true, ARRAY[v_n]);
    FOR v_k IN 1 .. cardinality(v_to) LOOP
        v_indeg[v_to[v_k]] := v_indeg[v_to[v_k]] + 1;
        v_sink[v_from[v_k]] := false;
    END LOOP;
    IF p_parent IS NOT NULL THEN
        -- Every root waits for the spawning node.
        FOR v_i IN 1 .. v_n LOOP
            IF v_indeg[v_i] = 0 THEN v_indeg[v_i] := 1; END IF;
        END LOOP;
    END IF;
    v_ids := '{}';
    FOR v_i IN 1 .. v_n LOOP
        v_node := v_nodes->(v_i - 1);
        v_meta := coalesce(v_node->'metadata', '{}'::jsonb)
                  || jsonb_build_object('docket:workflow',
                                        jsonb_build_object('id', v_wf, 'node', v_node->>'name'));
        v_args := coalesce(v_node->'args', '{}'::jsonb);
        v_prio := coalesce((v_node->>'priority')::integer, 0);
        v_max := coalesce((v_node->>'max_attempts')::integer, 25);
        v_base := (v_node->>'backoff_base_ms')::bigint;
        v_cap := (v_node->>'backoff_cap_ms')::bigint;
        INSERT INTO jobs (queue, kind, args, priority, max_attempts, metadata, backoff_base_ms,
                          backoff_cap_ms, state, workflow_id, node, deps_waiting)
        VALUES (coalesce(v_node->>'queue', 'default'), v_node->>'kind', v_args, v_prio::smallint,
                v_max, v_meta, v_base, v_cap,
                CASE WHEN v_indeg[v_i] > 0 THEN 'waiting' ELSE 'pending' END,
                v_wf, v_node->>'name', v_indeg[v_i])
        RETURNING jobs.id INTO v_p;
        v_ids := v_ids || v_p::bigint;
    END LOOP;
    INSERT INTO job_deps (parent_id, child_id, workflow_id, on_failure)
    SELECT v_ids[f], v_ids[t], v_wf, p
    FROM unnest(v_from, v_to, v_pol) AS e(f, t, p);
    IF p_parent IS NOT NULL THEN
        -- The parent's waiting dependents, locked in id order, wait for every sink too.
        PERFORM 1 FROM jobs AS c
        WHERE c.id IN (SELECT d.child_id FROM job_deps AS d
                       WHERE d.parent_id = p_parent AND d.state = 'waiting')
        ORDER BY c.id FOR UPDATE;
        INSERT INTO job_deps (parent_id, child_id, workflow_id, on_failure)
        SELECT v_ids[s], d.child_id, v_wf, 'cancel'
        FROM generate_subscripts(v_ids, 1) AS s
        CROSS JOIN job_deps AS d
        WHERE v_sink[s] AND d.parent_id = p_parent AND d.state = 'waiting';
        UPDATE jobs AS c
        SET deps_waiting = c.deps_waiting + (SELECT count(*) FROM unnest(v_sink) AS k WHERE k)
        WHERE c.id IN (SELECT d.child_id FROM job_deps AS d
                       WHERE d.parent_id = p_parent AND d.state = 'waiting')
          AND c.state = 'waiting';
        -- And the roots after the parent.
        INSERT INTO job_deps (parent_id, child_id, workflow_id, on_failure)
        SELECT p_parent, v_ids[i], v_wf, 'cancel'
        FROM generate_subscripts(v_ids, 1) AS i
        WHERE NOT EXISTS (SELECT 1 FROM unnest(v_to) AS t WHERE t = i);
    ELSE
        -- Roots are ready now: wake the workers of their queues.
        PERFORM pg_notify(current_schema() || '_wakeup', q)
        FROM (SELECT DISTINCT coalesce(n->>'queue', 'default') AS q
              FROM jsonb_array_elements(v_nodes) WITH ORDINALITY AS x(n, i)
              WHERE v_indeg[i::integer] = 0) AS r;
    END IF;
    RETURN QUERY
    SELECT v_wf, v_names[i], v_ids[i] FROM generate_subscripts(v_ids, 1) AS i;
END
$$;

CREATE FUNCTION enqueue_workflow(p_graph jsonb)
RETURNS TABLE (workflow_id bigint, node text, job_id bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM enqueue_graph(p_graph, NULL, NULL)
$$;

-- A running node adds a graph to its own workflow (ctx.spawn), fenced by its claim (attempt,
-- owner, unexpired lease, the row locked) and once per step name: the spawn is recorded as
-- the step 'docket:spawn:<name>' with the new jobs' ids, so a later run of the node gets the
-- same jobs back instead of spawning again. No row: the claim no longer holds.
CREATE FUNCTION spawn_nodes(p_id bigint, p_attempt integer, p_owner text, p_step text,
    p_graph jsonb)
RETURNS TABLE (workflow_id bigint, node text, job_id bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_wf bigint;
    v_done jsonb;
    v_names text[];
    v_ids bigint[];
    v_name text := 'docket:spawn:' || p_step;
BEGIN
    SELECT j.workflow_id INTO v_wf FROM jobs AS j
    WHERE j.id = p_id AND j.attempt = p_attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_wf IS NULL THEN
        RAISE EXCEPTION 'workflow refused: only a workflow node can spawn nodes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.output INTO v_done FROM job_steps AS s WHERE s.job_id = p_id AND s.name = v_name;
    IF FOUND THEN
        RETURN QUERY SELECT v_wf, k, (v_done->>k)::bigint FROM jsonb_object_keys(v_done) AS k;
        RETURN;
    END IF;
    SELECT array_agg(g.node ORDER BY g.job_id), array_agg(g.job_id ORDER BY g.job_id)
    INTO v_names, v_ids
    FROM enqueue_graph(p_graph, p_id, v_wf) AS g;
    INSERT INTO job_steps (job_id, name, attempt, output)
    SELECT p_id, v_name, p_attempt, jsonb_object_agg(x.n, x.i) FROM unnest(v_names, v_ids) AS x(n, i);
    RETURN QUERY SELECT v_wf, x.n, x.i FROM unnest(v_names, v_ids) AS x(n, i);
END
$$;

-- The pruner's share: edges into nodes that no longer exist (pruned, or removed with their
-- queue), then workflows with no node left, each bounded. A definer, like prune_steps(): the
-- worker role writes neither table itself.
CREATE FUNCTION prune_workflows(p_batch bigint)
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
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone_workflows AS (
        DELETE FROM workflows AS w USING empty WHERE w.id = empty.id RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_workflows)
$$;

-- An operator's cancel reaches a waiting node too (cancel_job, migration 0016, with
-- 'waiting' beside 'pending'); the trigger then resolves its children.
CREATE OR REPLACE FUNCTION cancel_job(p_id bigint)
RETURNS TABLE (previous_state text)
LANGUAGE sql VOLATILE AS $$
    WITH cur AS (
        SELECT c.id, c.state FROM jobs AS c WHERE c.id = p_id FOR UPDATE
    )
    UPDATE jobs AS j
    SET state = CASE WHEN cur.state IN ('pending', 'waiting') THEN 'cancelled' ELSE j.state END,
        finished_at = CASE WHEN cur.state IN ('pending', 'waiting') THEN now() ELSE j.finished_at END,
        cancel_requested_at = coalesce(j.cancel_requested_at, now()),
        errors = CASE WHEN j.cancel_requested_at IS NULL
                      THEN push_error(j.errors, jsonb_build_object(
                           'attempt', j.attempt - j.released, 'at', now(), 'class', 'cancel_requested',
                           'owner', session_user::text,
                           'message', 'cancel requested by role ' || session_user::text))
                      ELSE j.errors END,
        blocked = false
    FROM cur
    WHERE j.id = cur.id AND cur.state IN ('pending', 'running', 'waiting')
    RETURNING cur.state
$$;

-- A retried node waits again for what it still needs (retry_job, migration 0016): its
-- failed edges are re-armed — satisfied if the parent has since succeeded, waiting
-- otherwise — and it is 'waiting' while any edge waits, so a retry never runs a child
-- before its parents.
CREATE OR REPLACE FUNCTION retry_job(p_id bigint, p_extra integer)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_waiting integer := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM jobs AS c WHERE c.id = p_id AND c.workflow_id IS NOT NULL
                 AND c.state IN ('dead', 'cancelled') AND p_extra BETWEEN 1 AND 1000) THEN
        UPDATE job_deps AS d
        SET state = CASE WHEN p.state = 'succeeded' THEN 'satisfied' ELSE 'waiting' END
        FROM jobs AS p
        WHERE d.child_id = p_id AND d.state = 'failed' AND p.id = d.parent_id;
        SELECT count(*) INTO v_waiting FROM job_deps AS d
        WHERE d.child_id = p_id AND d.state = 'waiting';
    END IF;
    RETURN QUERY
    UPDATE jobs AS j
    SET state = CASE WHEN v_waiting > 0 THEN 'waiting' ELSE 'pending' END,
        deps_waiting = CASE WHEN j.workflow_id IS NOT NULL THEN v_waiting ELSE j.deps_waiting END,
        run_at = now(),
        finished_at = NULL,
        cancel_requested_at = NULL,
        max_attempts = j.attempt + p_extra
    WHERE j.id = p_id AND j.state IN ('dead', 'cancelled') AND p_extra BETWEEN 1 AND 1000
    RETURNING j.id;
END
$$;

ALTER FUNCTION cancel_job(bigint) SECURITY DEFINER;
ALTER FUNCTION retry_job(bigint, integer) SECURITY DEFINER;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION cancel_job(bigint) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION retry_job(bigint, integer) SET search_path = %I, pg_temp', current_schema());
END
$$;

-- Definers with a pinned path, granted to whoever may claim (as in migration 0017); the
-- application's role (docket grant) gets enqueue_workflow as it gets enqueue.
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'workflow_resolve(bigint, text)',
        'jobs_workflow_ended()',
        'complete_nodes_fenced(bigint[], integer[], jsonb[], text)',
        'enqueue_workflow(jsonb)',
        'enqueue_graph(jsonb, bigint, bigint)',
        'spawn_nodes(bigint, integer, text, text, jsonb)',
        'prune_workflows(bigint)'
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
