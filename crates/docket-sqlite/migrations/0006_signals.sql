-- Docket on SQLite, migration 0006: signals a job waits for.
--
-- One row per (job, name), the first sent kept (docket-local's signals.rs). No foreign key to
-- jobs, as for steps: signals whose job is gone are deleted by the pruner
-- (sql/signals_prune.sql).
CREATE TABLE job_signals (
    job_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 128),
    payload TEXT    NOT NULL CHECK (json_valid(payload) AND length(CAST(payload AS BLOB)) <= 1048576),
    sent_at TIMEINT NOT NULL,
    PRIMARY KEY (job_id, name)
);
