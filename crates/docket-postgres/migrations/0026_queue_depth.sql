-- Migration 0026: per-minute depth of every queue, sampled by the leader.
--
-- "Which queue is backing up, and since when?" and "how fast are we enqueuing?" had no
-- answer: the overview is a snapshot and the samples count only what workers ran. The
-- leader now writes, once a minute, each queue's waiting and running jobs and the jobs
-- enqueued since the previous sample (ids above the previous high-water mark that still
-- exist; `enqueued` is NULL for the first sample after a gap). The row with queue '' is the
-- whole database's and carries the high-water mark even when no queue has work. Rows older
-- than two days go in the same statement (depth_sample.sql).
CREATE TABLE queue_depth (
    minute   timestamptz NOT NULL,
    queue    text        NOT NULL CHECK (octet_length(queue) <= 64),
    waiting  bigint      NOT NULL CHECK (waiting >= 0),
    running  bigint      NOT NULL CHECK (running >= 0),
    enqueued bigint      CHECK (enqueued >= 0),
    hwm      bigint      NOT NULL,
    PRIMARY KEY (minute, queue)
);
