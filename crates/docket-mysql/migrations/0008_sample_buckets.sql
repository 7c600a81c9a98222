-- Docket on MariaDB / MySQL, migration 0008: per-minute histograms of queue waits and run
-- times (fixed buckets, docket_core::histogram), one additive row per queue, minute, metric
-- ('w' wait, 'r' run) and non-empty bucket, so the dashboard reads percentiles.
CREATE TABLE sample_buckets (
    queue     VARCHAR(64) NOT NULL,
    minute_at BIGINT      NOT NULL COMMENT 'time_ms',
    metric    CHAR(1)     NOT NULL,
    bucket    SMALLINT    NOT NULL,
    n         BIGINT      NOT NULL,
    PRIMARY KEY (queue, minute_at, metric, bucket),
    KEY sample_buckets_minute_idx (minute_at),
    CONSTRAINT sample_buckets_metric CHECK (metric IN ('w', 'r')),
    CONSTRAINT sample_buckets_bucket CHECK (bucket BETWEEN 0 AND 63),
    CONSTRAINT sample_buckets_n CHECK (n >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
