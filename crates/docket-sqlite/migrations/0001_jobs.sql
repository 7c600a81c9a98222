-- Docket on SQLite, migration 0001: every table of the queue in one file.
--
-- The same state machine as PostgreSQL (docket-postgres, schema/current.sql): a job is
-- pending, running (with a lease: owner + expiry), succeeded, dead or cancelled; `attempt`
-- is the fencing token, +1 on every claim and compared by every later write.
--
-- Times are integers: milliseconds since the Unix epoch on SQLite's own clock
-- (unixepoch('subsec')), read once at the start of each write transaction and bound to its
-- statements, so every deadline in a transaction is measured from one instant and no
-- worker's clock is ever used. The declared type TIMEINT (integer affinity) marks them, so
-- tooling (and the test harness that moves the clock) finds every time column.
--
-- Writers are serialised by SQLite itself (one writer at a time, BEGIN IMMEDIATE), so the
-- claim needs neither SKIP LOCKED nor advisory locks: it reads and decides inside its own
-- write transaction, where nothing else can change the data. That is also why there is no
-- `blocked` flag maintenance here: the column exists so rows read the same on every engine,
-- and is always 0 (a CHECK says so).

CREATE TABLE jobs (
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
               OR state = 'cancelled'),
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

    -- running <=> a lease (owner and expiry) is held.
    CHECK ((state = 'running') = (lease_owner IS NOT NULL)
           AND (state = 'running') = (lease_expires_at IS NOT NULL)),
    -- terminal <=> finished_at is set.
    CHECK ((state NOT IN ('pending', 'running')) = (finished_at IS NOT NULL)),
    -- A pending job always has budget left.
    CHECK (state <> 'pending' OR attempt < max_attempts),
    CHECK (attempt <= max_attempts),
    -- Times are integers within 1970..9999 (what every client represents).
    CHECK (typeof(run_at) = 'integer' AND run_at BETWEEN 0 AND 253402300799999),
    CHECK (typeof(created_at) = 'integer' AND created_at BETWEEN 0 AND 253402300799999)
);

-- Every index here is kept up by every claim and completion that changes `state`, so there
-- are as few as the reads need (counted with callgrind: an index in run_at order cost 8 % of
-- a claim-and-complete, a second index of running jobs 5 %).
-- The claimable rows in claim order; also the starvation bound's order and the oldest
-- ready age, read priority by priority (candidates_starving.sql, overview.sql).
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

-- Maintenance leadership: a row with an expiry (fails over when the leader stalls, too).
CREATE TABLE leader (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at TIMEINT NOT NULL
);

-- Queue controls. A queue without a row has none.
CREATE TABLE queues (
    name            TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    paused_at       TIMEINT,
    max_running     INTEGER CHECK (max_running > 0),
    key_max_running INTEGER CHECK (key_max_running > 0),
    rate_limit      INTEGER CHECK (rate_limit > 0),
    rate_period_ms  INTEGER CHECK (rate_period_ms > 0),
    tokens          REAL    NOT NULL DEFAULT 0,
    refilled_at     TIMEINT NOT NULL,
    updated_at      TIMEINT NOT NULL,
    CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- Limits of one concurrency key, across every queue.
CREATE TABLE key_limits (
    key            TEXT    PRIMARY KEY CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 512),
    max_running    INTEGER CHECK (max_running > 0),
    rate_limit     INTEGER CHECK (rate_limit > 0),
    rate_period_ms INTEGER CHECK (rate_period_ms > 0),
    tokens         REAL    NOT NULL DEFAULT 0,
    refilled_at    TIMEINT NOT NULL,
    updated_at     TIMEINT NOT NULL,
    CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- Periodic (cron) definitions; next_tick_at advances by compare-and-set in the transaction
-- that enqueues the tick's job.
CREATE TABLE periodic (
    name         TEXT    PRIMARY KEY,
    cron         TEXT    NOT NULL CHECK (length(cron) BETWEEN 1 AND 256),
    timezone     TEXT    NOT NULL DEFAULT 'UTC',
    queue        TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 64),
    kind         TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128),
    args         TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(args)),
    priority     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    missed       TEXT    NOT NULL DEFAULT 'latest' CHECK (missed IN ('skip', 'latest', 'all')),
    next_tick_at TIMEINT NOT NULL,
    last_tick_at TIMEINT,
    last_job_id  INTEGER,
    updated_at   TIMEINT NOT NULL
);

-- The registry of live worker processes (a report, never a lock).
CREATE TABLE workers (
    owner       TEXT    PRIMARY KEY CHECK (length(owner) BETWEEN 1 AND 200),
    host        TEXT    NOT NULL CHECK (length(host) <= 255),
    pid         INTEGER NOT NULL CHECK (pid >= 0),
    queues      TEXT    NOT NULL CHECK (json_valid(queues) AND json_type(queues) = 'array'),
    concurrency INTEGER NOT NULL CHECK (concurrency >= 0),
    in_flight   INTEGER NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    started_at  TIMEINT NOT NULL,
    seen_at     TIMEINT NOT NULL,
    expires_at  TIMEINT NOT NULL
);

-- Operator actions (the dashboard's and the CLI's), newest last.
CREATE TABLE operator_actions (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     TIMEINT NOT NULL,
    actor  TEXT    NOT NULL CHECK (length(CAST(actor AS BLOB)) BETWEEN 1 AND 200),
    action TEXT    NOT NULL CHECK (length(CAST(action AS BLOB)) BETWEEN 1 AND 64),
    target TEXT    NOT NULL CHECK (length(CAST(target AS BLOB)) BETWEEN 1 AND 2048),
    detail TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(detail) AND length(detail) <= 16384)
);

-- Per-minute throughput and wait samples, added by every worker.
CREATE TABLE samples (
    queue       TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 64),
    minute_at   TIMEINT NOT NULL,
    succeeded   INTEGER NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    failed      INTEGER NOT NULL DEFAULT 0 CHECK (failed >= 0),
    wait_ms_sum INTEGER NOT NULL DEFAULT 0 CHECK (wait_ms_sum >= 0),
    wait_count  INTEGER NOT NULL DEFAULT 0 CHECK (wait_count >= 0),
    run_ms_sum  INTEGER NOT NULL DEFAULT 0 CHECK (run_ms_sum >= 0),
    PRIMARY KEY (queue, minute_at)
);
