-- Docket migration 0013: a job may be completed by deleting it.
--
-- A worker that does not keep succeeded jobs (WorkerConfig::keep_succeeded = false, the
-- default since this migration) completes a batch with sql/complete_delete_many.sql: a fenced
-- DELETE instead of an UPDATE to 'succeeded'. The UPDATE wrote a new version of every row and
-- inserted it into the primary key and jobs_finished_idx; the DELETE only stamps the old
-- version. With one worker process on library defaults that took the drain from 0.57–0.68 to
-- 0.70–0.85 of the SQL floor (docs/benchmarks.md, 2026-12-04, commit 217523e).
--
-- A keyed job must still release its keys when it ends that way: the next job of its ordering
-- key becomes claimable, and a slot of its concurrency key frees. jobs_release_keys() (0005)
-- ran only AFTER UPDATE OF state; it now also runs AFTER DELETE of a running keyed row, which
-- it treats as a success. Only the fenced completion deletes a running row (prune deletes
-- finished rows; an operator's DELETE of a running row releases its keys the same way, as a
-- job that vanished cannot hold them). Same lock discipline as before: the shared key lock
-- waits for a claim deciding the key, so no blocked flag is left behind.
CREATE OR REPLACE FUNCTION jobs_release_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    -- The state the job ended in: a deleted running row (there is no NEW row to read) ended
    -- as a success would have.
    v_state text := 'succeeded';
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_state := NEW.state;
    END IF;
    IF OLD.ordering_key IS NOT NULL AND v_state IN ('succeeded', 'cancelled') THEN
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

CREATE TRIGGER jobs_release_keys_on_delete AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'running' AND (OLD.ordering_key IS NOT NULL OR OLD.concurrency_key IS NOT NULL))
    EXECUTE FUNCTION jobs_release_keys();
