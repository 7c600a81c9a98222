-- Job outputs and progress: a handler's result, stored with its job by the fenced
-- completion, and what a running handler reports, written with its heartbeat.
--
-- * jobs.output (jsonb, NULL for a job without one): written only by
--   complete_output_fenced(), whose fence is complete_fenced()'s (attempt, owner, unexpired
--   lease on the database clock), so a stale attempt records nothing. Only a succeeded job
--   carries one (CHECK), and none over 16 MiB of stored text (the client's hard cap,
--   docket_core::output::MAX_OUTPUT_BYTES; the client refuses first, with the size). Both
--   checks NOT VALID: every existing row has no output, and validating would scan the table
--   under its lock.
-- * Each completion announces its job on <schema>_done (payload: the id), delivered on commit,
--   so a caller waiting for an output wakes at once (a hint: the waiter reads the row).
-- * jobs.progress_percent / progress_message / progress_at: written only by
--   progress_fenced(), whose fence is heartbeat_fenced()'s; 0..100 and at most 1,024 bytes
--   (the client cuts messages to 256).
-- * prune_finished() gains the outputs' window: a succeeded row with an output is deleted
--   only once past both windows. The three-argument form stays for older clients.

ALTER TABLE jobs ADD COLUMN output jsonb;
ALTER TABLE jobs ADD CONSTRAINT jobs_output_bounded
    CHECK (output IS NULL OR octet_length(output::text) <= 16777216) NOT VALID;
ALTER TABLE jobs ADD CONSTRAINT jobs_output_succeeded
    CHECK (output IS NULL OR state = 'succeeded') NOT VALID;

ALTER TABLE jobs ADD COLUMN progress_percent real;
ALTER TABLE jobs ADD COLUMN progress_message text;
ALTER TABLE jobs ADD COLUMN progress_at timestamptz;
ALTER TABLE jobs ADD CONSTRAINT jobs_progress_bounded
    CHECK ((progress_percent IS NULL OR progress_percent BETWEEN 0 AND 100)
           AND (progress_message IS NULL OR octet_length(progress_message) <= 1024)) NOT VALID;

CREATE FUNCTION progress_fenced(p_ids bigint[], p_attempts integer[], p_percents real[],
    p_messages text[], p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
    -- heartbeat_fenced()'s fence (migration 0016), without extending the lease. Committed
    -- without waiting for its WAL flush: a report lost in a crash is replaced by the next.
    SELECT set_config('synchronous_commit', 'off', true);
    UPDATE jobs AS j
    SET attempt = c.attempt, progress_percent = c.percent, progress_message = c.message,
        progress_at = statement_timestamp()
    FROM unnest(p_ids, p_attempts, p_percents, p_messages) AS c(id, attempt, percent, message)
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt
$$;

CREATE FUNCTION complete_output_fenced(p_ids bigint[], p_attempts integer[], p_outputs jsonb[],
    p_owner text)
RETURNS TABLE (id bigint, attempt integer)
LANGUAGE sql VOLATILE AS $$
    -- complete_fenced() (migration 0016) with the output: the same plan notes and fence.
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
    SELECT d.id, d.attempt
    FROM done AS d
    CROSS JOIN LATERAL (SELECT pg_notify(current_schema() || '_done', d.id::text)) AS n
$$;

CREATE FUNCTION prune_finished(p_states text[], p_retention_ms bigint, p_outputs_ms bigint,
    p_batch bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- prune_finished(text[], bigint, bigint) (migration 0016), and a row with an output is
    -- also past the outputs' window.
    WITH doomed AS (
        SELECT d.id
        FROM jobs AS d
        WHERE d.state = ANY(p_states)
          AND d.state IN ('succeeded', 'dead', 'cancelled')
          AND d.finished_at IS NOT NULL
          AND d.finished_at < now() - p_retention_ms * interval '1 millisecond'
          AND (d.output IS NULL
               OR d.finished_at < now() - p_outputs_ms * interval '1 millisecond')
        LIMIT greatest(p_batch, 0)
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM jobs AS j USING doomed WHERE j.id = doomed.id RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

-- Definers with a pinned path, granted to whoever may claim (as in migration 0017).
DO $$
DECLARE
    f text;
    writer regrole;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'complete_output_fenced(bigint[], integer[], jsonb[], text)',
        'progress_fenced(bigint[], integer[], real[], text[], text)',
        'prune_finished(text[], bigint, bigint, bigint)'
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
