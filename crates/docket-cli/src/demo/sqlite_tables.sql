-- The demo's "email provider" on SQLite: one row per job id ever sent (the dedupe), one per
-- attempt, and the marker that lets the next `docket demo` recognise (and re-create) this
-- file as its own.
CREATE TABLE docket_demo_scratch (made_at INTEGER NOT NULL DEFAULT (unixepoch()));
INSERT INTO docket_demo_scratch DEFAULT VALUES;
CREATE TABLE demo_sends (job_id INTEGER PRIMARY KEY);
CREATE TABLE demo_attempts (job_id INTEGER, attempt INTEGER, deduped INTEGER);
