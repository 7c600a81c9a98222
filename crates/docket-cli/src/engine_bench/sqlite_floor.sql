-- The SQLite floor's table (like ../shared/bench/sql-floor.sh's): N queued jobs.
-- Parameters: ?1 N, ?2 now (ms).
CREATE TABLE floor_jobs (
    id           INTEGER PRIMARY KEY,
    queue        TEXT    NOT NULL DEFAULT 'default',
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'queued',
    run_at       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    locked_until INTEGER
);
CREATE INDEX floor_ready ON floor_jobs (queue, run_at) WHERE status = 'queued';
