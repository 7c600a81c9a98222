-- Docket on MariaDB / MySQL, migration 0009: the leader's per-minute depth of every queue
-- (waiting, running, enqueued since the previous sample), for the queues page's backlog
-- history and enqueue rate. The row with queue '' is the whole database's and carries the
-- high-water mark (the highest job id at the sample). Rows older than two days are deleted by
-- the sampler.
CREATE TABLE queue_depth (
    minute_at BIGINT      NOT NULL COMMENT 'time_ms',
    queue     VARCHAR(64) NOT NULL,
    waiting   BIGINT      NOT NULL,
    running   BIGINT      NOT NULL,
    enqueued  BIGINT      NULL,
    hwm       BIGINT      NOT NULL,
    PRIMARY KEY (minute_at, queue),
    CONSTRAINT queue_depth_counts CHECK (waiting >= 0 AND running >= 0 AND enqueued >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
