-- Migration 0022: the oldest waiting job of a queue in one index probe, blocked jobs included.
--
-- "Is anything stuck?" is answered by the oldest due job that has not started. A job held by
-- its ordering or concurrency key is `blocked` and lives outside jobs_age_idx, so the
-- dashboard's overview (run every refresh) could only see the oldest *ready* job: a queue
-- showed 0.2 s while its oldest held job had waited for minutes. jobs_blocked_idx served
-- only the per-queue loose scan (queue); ordering it by run_at too lets the overview read the
-- oldest blocked job of a queue with one probe, and still serves that scan. Blocked jobs are
-- few, so the rebuild and the wider entries cost little.
DROP INDEX IF EXISTS jobs_blocked_idx;
CREATE INDEX jobs_blocked_idx ON jobs (queue, run_at) WHERE state = 'pending' AND blocked;
