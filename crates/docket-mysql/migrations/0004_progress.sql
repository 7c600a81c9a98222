-- Docket on MariaDB / MySQL, migration 0004: progress of running jobs.
--
-- What a running handler reports (ctx.progress), written with its heartbeat and fenced like it
-- (sql/progress.sql): a percentage from 0 to 100 and a message of at most 1,024 bytes (the
-- client cuts messages to 256), with the database time of the write (ms). Instant column adds.
ALTER TABLE jobs ADD COLUMN progress_percent DOUBLE NULL;
ALTER TABLE jobs ADD COLUMN progress_message VARCHAR(1024) NULL;
ALTER TABLE jobs ADD COLUMN progress_at BIGINT NULL COMMENT 'time_ms';
ALTER TABLE jobs ADD CONSTRAINT jobs_progress_bounded CHECK (progress_percent IS NULL OR progress_percent BETWEEN 0 AND 100);
