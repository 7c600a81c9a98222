-- Docket on MariaDB / MySQL, migration 0006: signals a job waits for.
--
-- One row per (job, name), the first sent kept (docket-local's signals.rs). No foreign key to
-- jobs, as for steps: signals whose job is gone are deleted by the pruner
-- (sql/signals_prune.sql). Names compare byte for byte, as on the other engines.
CREATE TABLE job_signals (
    job_id  BIGINT       NOT NULL,
    name    VARCHAR(128) NOT NULL,
    payload LONGTEXT     NOT NULL,
    sent_at BIGINT       NOT NULL COMMENT 'time_ms',
    PRIMARY KEY (job_id, name),
    CONSTRAINT job_signals_payload_json CHECK (JSON_VALID(payload) AND LENGTH(payload) <= 1048576)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
