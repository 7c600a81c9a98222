-- Docket on SQLite, migration 0004: progress of running jobs.
--
-- What a running handler reports (ctx.progress), written with its heartbeat and fenced like it
-- (sql/progress.sql): a percentage from 0 to 100 and a message of at most 1,024 bytes (the
-- client cuts messages to 256), with the database time of the write (ms).
ALTER TABLE jobs ADD COLUMN progress_percent REAL
    CHECK (progress_percent IS NULL OR progress_percent BETWEEN 0 AND 100);
ALTER TABLE jobs ADD COLUMN progress_message TEXT
    CHECK (progress_message IS NULL OR length(CAST(progress_message AS BLOB)) <= 1024);
ALTER TABLE jobs ADD COLUMN progress_at TIMEINT;
