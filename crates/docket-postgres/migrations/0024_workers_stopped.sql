-- Migration 0024: a stopped worker stays in the registry for a day, marked as stopped.
--
-- "Which worker is dead?" needs the workers that are gone, not only the live ones: a worker
-- that stopped used to delete its row, and a SIGKILLed one vanished from the live list as
-- soon as its report expired, so the page could not tell a clean stop from a crash. A stop
-- now sets stopped_at (and ends the row's expiry); a crash leaves stopped_at NULL and an
-- expiry in the past. Rows go a day after they expired, as before (worker_beat.sql).
ALTER TABLE workers ADD COLUMN stopped_at timestamptz;
