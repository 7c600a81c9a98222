-- Docket on SQLite, migration 0009: the leader's per-minute depth of every queue (waiting,
-- running, enqueued since the previous sample), for the queues page's backlog history and
-- enqueue rate. The row with queue '' is the whole database's and carries the high-water mark
-- (the highest job id at the sample). Rows older than two days are deleted by the sampler.
CREATE TABLE queue_depth (
    minute_at TIMEINT NOT NULL,
    queue     TEXT    NOT NULL CHECK (length(CAST(queue AS BLOB)) <= 64),
    waiting   INTEGER NOT NULL CHECK (waiting >= 0),
    running   INTEGER NOT NULL CHECK (running >= 0),
    enqueued  INTEGER CHECK (enqueued >= 0),
    hwm       INTEGER NOT NULL,
    PRIMARY KEY (minute_at, queue)
) WITHOUT ROWID;
