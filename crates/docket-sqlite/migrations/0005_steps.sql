-- Docket on SQLite, migration 0005: memoized steps.
--
-- One row per (job, name): the run that recorded it and its output, written by the shared
-- rules' fenced record (docket-local's steps.rs) inside one write transaction that checks the
-- claim first. No foreign key to jobs (its check would cost every delete of a job, the plain
-- jobs' fast path); steps whose job is gone are deleted by the pruner (sql/steps_prune.sql).
CREATE TABLE job_steps (
    job_id      INTEGER NOT NULL,
    name        TEXT    NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 128),
    attempt     INTEGER NOT NULL,
    output      TEXT    NOT NULL CHECK (json_valid(output) AND length(CAST(output AS BLOB)) <= 16777216),
    recorded_at TIMEINT NOT NULL,
    PRIMARY KEY (job_id, name)
);
