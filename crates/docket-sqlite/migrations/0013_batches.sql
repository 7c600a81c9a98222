-- Docket on SQLite, migration 0013: batches — a set of jobs, added to until closed, whose
-- callback jobs are enqueued once every member has ended (the rules: docket-local's
-- `batches` module; PostgreSQL: migration 0031).
--
-- * A batch is a workflow without edges; its row gains the callbacks (JSON text, NULL for a
--   graph), closed_at / ended_at, the counters unfinished / succeeded / dead / cancelled
--   and each callback's job once it fired. SQLite cannot change a CHECK in place, so
--   `workflows` is rebuilt (copy, drop, rename, inside the migration's transaction) with
--   nodes allowed 0..=100000 — a batch is opened empty — and its AUTOINCREMENT high-water
--   mark carried over.
-- * jobs.batch_id: a member's batch (NULL for every other job).

CREATE TABLE workflows_next (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT    NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 128),
    nodes           INTEGER NOT NULL CHECK (nodes BETWEEN 0 AND 100000),
    created_at      TIMEINT NOT NULL,
    callbacks       TEXT,
    closed_at       TIMEINT,
    ended_at        TIMEINT,
    unfinished      INTEGER NOT NULL DEFAULT 0,
    succeeded       INTEGER NOT NULL DEFAULT 0,
    dead            INTEGER NOT NULL DEFAULT 0,
    cancelled       INTEGER NOT NULL DEFAULT 0,
    on_success_job  INTEGER,
    on_complete_job INTEGER,
    on_failure_job  INTEGER
);
INSERT INTO workflows_next (id, name, nodes, created_at)
SELECT id, name, nodes, created_at FROM workflows;
INSERT INTO sqlite_sequence (name, seq)
SELECT 'workflows_next', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'workflows_next');
UPDATE sqlite_sequence
SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'workflows'), 0))
WHERE name = 'workflows_next';
DROP TABLE workflows;
ALTER TABLE workflows_next RENAME TO workflows;
-- The batches list (newest first) without reading graphs' rows.
CREATE INDEX workflows_batches_idx ON workflows (id) WHERE callbacks IS NOT NULL;

ALTER TABLE jobs ADD COLUMN batch_id INTEGER;
