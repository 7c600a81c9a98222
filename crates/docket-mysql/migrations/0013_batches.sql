-- Docket on MariaDB / MySQL, migration 0013: batches — a set of jobs, added to until
-- closed, whose callback jobs are enqueued once every member has ended (the rules:
-- docket-local's `batches` module; PostgreSQL: migration 0031).
--
-- * A batch is a workflow without edges; its row gains the callbacks (JSON text, NULL for a
--   graph), closed_at / ended_at, the counters unfinished / succeeded / dead / cancelled
--   and each callback's job once it fired; nodes may be 0..=100000 (a batch is opened
--   empty). One ALTER per table (DDL is not transactional here: one statement is all or
--   nothing).
-- * jobs.batch_id: a member's batch (NULL for every other job).
ALTER TABLE workflows
    ADD COLUMN callbacks LONGTEXT NULL,
    ADD COLUMN closed_at BIGINT NULL COMMENT 'time_ms',
    ADD COLUMN ended_at BIGINT NULL COMMENT 'time_ms',
    ADD COLUMN unfinished INT NOT NULL DEFAULT 0,
    ADD COLUMN succeeded INT NOT NULL DEFAULT 0,
    ADD COLUMN dead INT NOT NULL DEFAULT 0,
    ADD COLUMN cancelled INT NOT NULL DEFAULT 0,
    ADD COLUMN on_success_job BIGINT NULL,
    ADD COLUMN on_complete_job BIGINT NULL,
    ADD COLUMN on_failure_job BIGINT NULL,
    DROP CONSTRAINT workflows_nodes,
    ADD CONSTRAINT workflows_nodes CHECK (nodes BETWEEN 0 AND 100000);

ALTER TABLE jobs ADD COLUMN batch_id BIGINT NULL;
