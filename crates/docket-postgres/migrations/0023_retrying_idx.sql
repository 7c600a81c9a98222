-- Migration 0023: retrying jobs found without a scan.
--
-- "Which error is new?" must count jobs that are still retrying, not only dead ones: a new
-- failure shows first as pending jobs with an error history. Among a million pending jobs
-- those are few, and no index held them apart; this partial index does (newest first by
-- id), so the dashboard's errors page reads the latest of them in one index walk. A job
-- enters it when a failure sends it back to pending and leaves it when it is claimed again,
-- so only failing jobs pay for its upkeep.
CREATE INDEX jobs_retrying_idx ON jobs (id) WHERE state = 'pending' AND errors <> '[]'::jsonb;
