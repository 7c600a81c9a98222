-- The MariaDB / MySQL floor's table (like ../shared/bench/sql-floor.sh's).
CREATE TABLE floor_jobs (
    id           BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue        VARCHAR(64) NOT NULL DEFAULT 'default',
    payload      LONGTEXT    NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'queued',
    run_at       BIGINT      NOT NULL,
    attempts     INT         NOT NULL DEFAULT 0,
    locked_until BIGINT      NULL,
    KEY floor_ready (queue, status, run_at)
) ENGINE = InnoDB
