-- Docket migration 0011: a claim commits without waiting for its WAL flush.
--
-- A drain's database sessions spent more time waiting for WAL flushes (wait events
-- WALWrite and WALSync, sampled from pg_stat_activity) than on CPU, and a claim's commit
-- was a third of those flushes. A claim need not be durable: a claim lost in a server crash
-- (the last ~3 × wal_writer_delay of commits) is the same as a worker that claimed and
-- crashed before running anything — the job is `pending` again, with the attempt it had,
-- and the worker that may have run it can no longer write an outcome, because every write
-- is fenced on lease_owner, attempt and an unexpired lease, and the recovered row has no
-- lease. Delivery stays at-least-once; the lost attempt is not charged. The one case where
-- the token itself repeats — the same worker process claims the job again, with the same
-- attempt, while its first execution still runs — is caught by the worker, which keeps the
-- running execution and does not start a second (docket-worker executor).
-- Only the worker's claim opts in (p_async, passed by sql/claim.sql, which is always a
-- transaction of its own); claim() called with its five arguments, inside a caller's
-- transaction or not, is as durable as before, and so are completions, failures, enqueues
-- and every other write. `docket.durable_claims = on` (a custom setting: ALTER ROLE,
-- ALTER DATABASE or PGOPTIONS) makes claims wait for their flush as before.
-- Measured (docs/benchmarks.md, 2026-12-03, commit 8c9e0ae): one default process, N = 200,000, alternating
-- runs: 0.41-0.51 of the SQL floor with durable claims, 0.51-0.62 without.
-- The body is claim() of migration 0005 (with 0006's plan_cache_mode) plus the prologue.
-- The five-argument function is dropped, not overloaded (one definition to read); the new
-- one starts with PostgreSQL's default EXECUTE for PUBLIC. claim() is SECURITY INVOKER, so
-- that grants nothing a role lacks: claiming needs UPDATE on jobs. A schema on which
-- `docket grant` ran before should have it run again to revoke that default as before.
DROP FUNCTION claim(text, integer, text, bigint, bigint);
CREATE FUNCTION claim(p_queue text, p_limit integer, p_owner text, p_lease_ms bigint, p_starve_ms bigint,
                      p_async boolean DEFAULT false)
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
$function$;
