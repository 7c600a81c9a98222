-- Migration 0025: per-minute histograms of queue waits and run times.
--
-- samples keeps sums, so the dashboard could show a mean wait and nothing else; the p95 an
-- operator is asked about was not answerable. Workers now also add bucket counts (fixed
-- buckets, docket_core::histogram) per queue, minute and metric ('w' wait, 'r' run): one
-- additive row per non-empty bucket, so any number of workers report into the same rows,
-- and percentiles are read from the merged counts. Rows older than a day go with the
-- samples (sample_buckets_record.sql).
CREATE TABLE sample_buckets (
    queue   text        NOT NULL CHECK (octet_length(queue) BETWEEN 1 AND 64),
    minute  timestamptz NOT NULL,
    metric  "char"      NOT NULL CHECK (metric IN ('w', 'r')),
    bucket  smallint    NOT NULL CHECK (bucket BETWEEN 0 AND 63),
    n       bigint      NOT NULL CHECK (n >= 0),
    PRIMARY KEY (queue, minute, metric, bucket)
);
CREATE INDEX sample_buckets_minute_idx ON sample_buckets (minute);
