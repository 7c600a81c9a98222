-- Docket on SQLite, migration 0007: a stopped worker stays in the registry for a day, marked
-- as stopped (stopped_at, ms), so the dashboard can tell a clean stop from a crash (no
-- report since its expiry). Rows go a day after they expired (sql/worker_forget.sql).
ALTER TABLE workers ADD COLUMN stopped_at TIMEINT;
