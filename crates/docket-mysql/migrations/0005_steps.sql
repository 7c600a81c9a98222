-- Docket on MariaDB / MySQL, migration 0005: memoized steps.
--
-- One row per (job, name): the run that recorded it and its output, written by the shared
-- rules' fenced record (docket-local's steps.rs) inside one transaction that locks the job's
-- row with the claim's check first. No foreign key to jobs (its check would cost every delete
-- of a job, the plain jobs' fast path); steps whose job is gone are deleted by the pruner
-- (sql/steps_prune.sql). Names compare byte for byte, as on the other engines.
CREATE TABLE job_steps (
    job_id      BIGINT       NOT NULL,
    name        VARCHAR(128) NOT NULL,
    attempt     INT          NOT NULL,
    output      LONGTEXT     NOT NULL,
    recorded_at BIGINT       NOT NULL COMMENT 'time_ms',
    PRIMARY KEY (job_id, name),
    CONSTRAINT job_steps_output_json CHECK (JSON_VALID(output) AND LENGTH(output) <= 16777216)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
