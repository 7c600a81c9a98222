-- Migration 0023: retrying and dead jobs found without a scan.
--
-- jobs_retrying_idx: "which error is new?" must count jobs that are still retrying, not only
-- dead ones: a new failure shows first as pending jobs with an error history. Among a
-- million pending jobs those are few, and no index held them apart; this partial index does
-- (newest first by id), so the dashboard's errors page reads the latest of them in one index
-- walk. A job enters it when a failure sends it back to pending and leaves it when it is
-- claimed again, so only failing jobs pay for its upkeep.
--
-- jobs_dead_id_idx: the job list filtered to dead jobs of every queue is ordered by id, and
-- jobs_dead_idx leads with the queue, so that page walked the primary key backwards past
-- every newer job (224 ms at 1 M pending and 10 M finished, scripts/dashboard-bench.sh);
-- by id alone it is one index walk. Dead jobs are few and written once.
CREATE INDEX jobs_retrying_idx ON jobs (id) WHERE state = 'pending' AND errors <> '[]'::jsonb;
CREATE INDEX jobs_dead_id_idx ON jobs (id) WHERE state = 'dead';
