-- Docket on SQLite, migration 0008: per-minute histograms of queue waits and run times (fixed
-- buckets, docket_core::histogram), one additive row per queue, minute, metric ('w' wait,
-- 'r' run) and non-empty bucket, so the dashboard reads percentiles, not only means.
CREATE TABLE sample_buckets (
    queue     TEXT    NOT NULL CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 64),
    minute_at TIMEINT NOT NULL,
    metric    TEXT    NOT NULL CHECK (metric IN ('w', 'r')),
    bucket    INTEGER NOT NULL CHECK (bucket BETWEEN 0 AND 63),
    n         INTEGER NOT NULL CHECK (n >= 0),
    PRIMARY KEY (queue, minute_at, metric, bucket)
) WITHOUT ROWID;
CREATE INDEX sample_buckets_minute_idx ON sample_buckets (minute_at);
