-- Docket on SQLite, migration 0012: workflows — graphs of jobs whose nodes wait for their
-- parents (the rules: docket-local's `workflow` module; PostgreSQL: migration 0030).
--
-- * A node with parents is enqueued in the new state 'waiting': outside every claim index
--   (they are partial on state = 'pending'). SQLite cannot change a table's CHECKs in
--   place, so `jobs` is rebuilt with the state list widened (the standard copy, drop and
--   rename, inside the migration's transaction), its AUTOINCREMENT high-water mark carried
--   over so no id is ever reused, and its indexes re-created as they were.
-- * jobs.workflow_id / node / deps_waiting; `workflows` (one row per graph); `job_deps`
--   (one row per edge, consumed once: 'waiting' to 'satisfied' or 'failed').

CREATE TABLE jobs_next (
    -- AUTOINCREMENT: an id is never reused, even after the newest job was pruned, so a
    -- stale lease can never name a different job.
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    queue               TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 64),
    kind                TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128),
    args                TEXT    NOT NULL CHECK (json_valid(args) AND length(args) <= 262144),
    -- No `IN` list of more than two constants in a CHECK or an index predicate on this
    -- table: SQLite builds such a list as a temporary b-tree and clears and refills it for
    -- every row written (measured with callgrind: two thirds of an INSERT's instructions,
    -- and a third of a claim's UPDATE). Equalities and two-value lists compare in place.
    state               TEXT    NOT NULL DEFAULT 'pending'
        CHECK (state = 'pending' OR state = 'running' OR state = 'succeeded' OR state = 'dead'
               OR state = 'cancelled' OR state = 'waiting'),
    priority            INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100),
    run_at              TIMEINT NOT NULL,
    attempt             INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts        INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    lease_owner         TEXT,
    lease_expires_at    TIMEINT,
    cancel_requested_at TIMEINT,
    unique_key          TEXT    CHECK (length(CAST(unique_key AS BLOB)) BETWEEN 1 AND 512),
    ordering_key        TEXT    CHECK (length(CAST(ordering_key AS BLOB)) BETWEEN 1 AND 512),
    concurrency_key     TEXT    CHECK (length(CAST(concurrency_key AS BLOB)) BETWEEN 1 AND 512),
    blocked             INTEGER NOT NULL DEFAULT 0 CHECK (blocked = 0),
    errors              TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    metadata            TEXT    NOT NULL DEFAULT '{}'
        CHECK (json_valid(metadata) AND json_type(metadata) = 'object' AND length(metadata) <= 16384),
    backoff_base_ms     INTEGER CHECK (backoff_base_ms BETWEEN 1 AND 604800000),
    backoff_cap_ms      INTEGER CHECK (backoff_cap_ms BETWEEN 1 AND 2592000000),
    created_at          TIMEINT NOT NULL,
    attempted_at        TIMEINT,
    finished_at         TIMEINT,
    released            INTEGER NOT NULL DEFAULT 0,
    output              TEXT
        CHECK (output IS NULL OR (json_valid(output) AND length(CAST(output AS BLOB)) <= 16777216
                                  AND state = 'succeeded')),
    progress_percent    REAL
        CHECK (progress_percent IS NULL OR progress_percent BETWEEN 0 AND 100),
    progress_message    TEXT
        CHECK (progress_message IS NULL OR length(CAST(progress_message AS BLOB)) <= 1024),
    progress_at         TIMEINT,
    -- A workflow node: its workflow, its name there, the edges into it not yet consumed.
    workflow_id         INTEGER,
    node                TEXT    CHECK (node IS NULL OR length(CAST(node AS BLOB)) BETWEEN 1 AND 128),
    deps_waiting        INTEGER,

    -- running <=> a lease (owner and expiry) is held.
    CHECK ((state = 'running') = (lease_owner IS NOT NULL)
           AND (state = 'running') = (lease_expires_at IS NOT NULL)),
    -- terminal <=> finished_at is set.
    CHECK ((state <> 'pending' AND state <> 'running' AND state <> 'waiting') = (finished_at IS NOT NULL)),
    -- A pending job always has budget left.
    CHECK (state <> 'pending' OR attempt < max_attempts),
    CHECK (attempt <= max_attempts),
    -- Times are integers within 1970..9999 (what every client represents).
    CHECK (typeof(run_at) = 'integer' AND run_at BETWEEN 0 AND 253402300799999),
    CHECK (typeof(created_at) = 'integer' AND created_at BETWEEN 0 AND 253402300799999),
    CHECK ((workflow_id IS NULL) = (node IS NULL)),
    CHECK (state <> 'waiting' OR (workflow_id IS NOT NULL AND deps_waiting > 0))
);

INSERT INTO jobs_next (id, queue, kind, args, state, priority, run_at, attempt, max_attempts, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key, concurrency_key, blocked, errors, metadata, backoff_base_ms, backoff_cap_ms, created_at, attempted_at, finished_at, released, output, progress_percent, progress_message, progress_at)
SELECT id, queue, kind, args, state, priority, run_at, attempt, max_attempts, lease_owner, lease_expires_at, cancel_requested_at, unique_key, ordering_key, concurrency_key, blocked, errors, metadata, backoff_base_ms, backoff_cap_ms, created_at, attempted_at, finished_at, released, output, progress_percent, progress_message, progress_at FROM jobs;
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_next', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'jobs_next');
UPDATE sqlite_sequence
SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0))
WHERE name = 'jobs_next';
DROP TABLE jobs;
ALTER TABLE jobs_next RENAME TO jobs;

CREATE INDEX jobs_claim_idx ON jobs (queue, priority, run_at, id) WHERE state = 'pending';
-- "Does this queue have keyed work to decide?"
CREATE INDEX jobs_keyed_ready_idx ON jobs (queue, run_at)
    WHERE state = 'pending' AND (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL);
-- Running jobs per queue (limits, stats) and the reaper's candidates (it reads the whole
-- running set, which the workers' slots bound).
CREATE INDEX jobs_lease_idx ON jobs (queue, lease_expires_at) WHERE state = 'running';
-- At most one unfinished job per unique key.
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('pending', 'running');
-- Pruning and finished-order listings.
CREATE INDEX jobs_finished_idx ON jobs (state, finished_at, id) WHERE finished_at IS NOT NULL;
-- Dead jobs by queue (overview, dead groups).
CREATE INDEX jobs_dead_idx ON jobs (queue, id) WHERE state = 'dead';
-- The unfinished jobs of an ordering key in order: the head check.
CREATE INDEX jobs_ordering_idx ON jobs (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state NOT IN ('succeeded', 'cancelled');
-- Running jobs per concurrency key.
CREATE INDEX jobs_concurrency_running_idx ON jobs (concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
-- A workflow's nodes by name.
CREATE INDEX jobs_workflow_idx ON jobs (workflow_id, node) WHERE workflow_id IS NOT NULL;

CREATE TABLE workflows (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 128),
    nodes      INTEGER NOT NULL CHECK (nodes BETWEEN 1 AND 20000),
    created_at TIMEINT NOT NULL
);

CREATE TABLE job_deps (
    parent_id   INTEGER NOT NULL,
    child_id    INTEGER NOT NULL,
    workflow_id INTEGER NOT NULL,
    on_failure  TEXT    NOT NULL CHECK (on_failure = 'cancel' OR on_failure = 'ignore' OR on_failure = 'hold'),
    state       TEXT    NOT NULL DEFAULT 'waiting'
        CHECK (state = 'waiting' OR state = 'satisfied' OR state = 'failed'),
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
-- A child's parents.
CREATE INDEX job_deps_child_idx ON job_deps (child_id);
-- A workflow's edges (its page).
CREATE INDEX job_deps_workflow_idx ON job_deps (workflow_id);
