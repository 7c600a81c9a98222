-- Docket on MariaDB / MySQL, migration 0001: every table of the queue.
--
-- The SQL MariaDB >= 10.6 and MySQL >= 8.0.16 share: InnoDB, CHECK constraints (enforced by
-- both), FOR UPDATE SKIP LOCKED, JSON functions over text columns, no RETURNING on UPDATE.
-- The same state machine as PostgreSQL: pending, running (lease: owner + expiry), succeeded,
-- dead, cancelled; `attempt` is the fencing token, +1 per claim, compared by every later
-- write.
--
-- Times are BIGINT milliseconds since the epoch on the server's clock, read once at the start
-- of each write transaction (COMMENT 'time_ms' marks them, for tooling and for the test
-- harness that moves the clock). Text is utf8mb4 with binary collation, so names and keys
-- compare byte for byte as on PostgreSQL. JSON is LONGTEXT checked by JSON_VALID: one type
-- that means the same on both servers.
--
-- No partial indexes on these servers: "one unfinished job per unique key" is a unique index
-- on a stored generated column that holds the key only while the job is pending or running.

CREATE TABLE jobs (
    id                  BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue               VARCHAR(64)  NOT NULL,
    kind                VARCHAR(128) NOT NULL,
    args                LONGTEXT     NOT NULL,
    state               VARCHAR(16)  NOT NULL DEFAULT 'pending',
    priority            SMALLINT     NOT NULL DEFAULT 0,
    run_at              BIGINT       NOT NULL COMMENT 'time_ms',
    attempt             INT          NOT NULL DEFAULT 0,
    max_attempts        INT          NOT NULL DEFAULT 25,
    lease_owner         VARCHAR(200) NULL,
    lease_expires_at    BIGINT       NULL COMMENT 'time_ms',
    cancel_requested_at BIGINT       NULL COMMENT 'time_ms',
    unique_key          VARCHAR(512) NULL,
    ordering_key        VARCHAR(512) NULL,
    concurrency_key     VARCHAR(512) NULL,
    blocked             TINYINT      NOT NULL DEFAULT 0,
    errors              LONGTEXT     NOT NULL,
    metadata            LONGTEXT     NOT NULL,
    backoff_base_ms     BIGINT       NULL,
    backoff_cap_ms      BIGINT       NULL,
    created_at          BIGINT       NOT NULL COMMENT 'time_ms',
    attempted_at        BIGINT       NULL COMMENT 'time_ms',
    finished_at         BIGINT       NULL COMMENT 'time_ms',
    unique_active       VARCHAR(512) GENERATED ALWAYS AS
        (CASE WHEN state IN ('pending', 'running') THEN unique_key END) STORED,

    CONSTRAINT jobs_state_valid CHECK (state IN ('pending', 'running', 'succeeded', 'dead', 'cancelled')),
    CONSTRAINT jobs_running_has_lease CHECK (
        (state = 'running') = (lease_owner IS NOT NULL)
        AND (state = 'running') = (lease_expires_at IS NOT NULL)),
    CONSTRAINT jobs_terminal_has_finished CHECK (
        (state IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT jobs_pending_has_budget CHECK (state <> 'pending' OR attempt < max_attempts),
    CONSTRAINT jobs_attempt_range CHECK (attempt >= 0 AND attempt <= max_attempts AND max_attempts > 0),
    CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -100 AND 100),
    CONSTRAINT jobs_blocked_unused CHECK (blocked = 0),
    CONSTRAINT jobs_queue_name CHECK (CHAR_LENGTH(queue) BETWEEN 1 AND 64),
    CONSTRAINT jobs_kind_name CHECK (CHAR_LENGTH(kind) BETWEEN 1 AND 128),
    CONSTRAINT jobs_args_json CHECK (JSON_VALID(args) AND LENGTH(args) <= 262144),
    CONSTRAINT jobs_errors_json CHECK (JSON_VALID(errors) AND JSON_TYPE(errors) = 'ARRAY'),
    CONSTRAINT jobs_metadata_json CHECK (
        JSON_VALID(metadata) AND JSON_TYPE(metadata) = 'OBJECT' AND LENGTH(metadata) <= 16384),
    CONSTRAINT jobs_times_in_range CHECK (
        run_at BETWEEN 0 AND 253402300799999 AND created_at BETWEEN 0 AND 253402300799999),
    CONSTRAINT jobs_backoff_range CHECK (
        (backoff_base_ms IS NULL OR backoff_base_ms BETWEEN 1 AND 604800000)
        AND (backoff_cap_ms IS NULL OR backoff_cap_ms BETWEEN 1 AND 2592000000)),

    UNIQUE KEY jobs_unique_active (unique_active),
    -- The claim: pending jobs of a queue in claim order.
    KEY jobs_claim (queue, state, priority, run_at, id),
    -- The starvation bound's order and the oldest-ready age.
    KEY jobs_age (queue, state, run_at, id),
    -- The reaper's candidates.
    KEY jobs_lease (state, lease_expires_at),
    -- Pruning and finished-order listings.
    KEY jobs_finished (state, finished_at, id),
    -- The unfinished jobs of an ordering key in order.
    KEY jobs_ordering (ordering_key, id),
    -- Running jobs per concurrency key.
    KEY jobs_concurrency (concurrency_key, state)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Maintenance leadership: a row with an expiry.
CREATE TABLE leader (
    name       VARCHAR(64)  NOT NULL PRIMARY KEY,
    owner      VARCHAR(200) NOT NULL,
    expires_at BIGINT       NOT NULL COMMENT 'time_ms'
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Queue controls. A queue without a row has none.
CREATE TABLE queues (
    name            VARCHAR(64) NOT NULL PRIMARY KEY,
    paused_at       BIGINT      NULL COMMENT 'time_ms',
    max_running     INT         NULL CHECK (max_running > 0),
    key_max_running INT         NULL CHECK (key_max_running > 0),
    rate_limit      INT         NULL CHECK (rate_limit > 0),
    rate_period_ms  BIGINT      NULL CHECK (rate_period_ms > 0),
    tokens          DOUBLE      NOT NULL DEFAULT 0,
    refilled_at     BIGINT      NOT NULL COMMENT 'time_ms',
    updated_at      BIGINT      NOT NULL COMMENT 'time_ms',
    CONSTRAINT queues_rate_complete CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The lock a claim holds on its queue for its transaction: shared by every claim, exclusive
-- for every control change (so a change waits for claims in flight and binds every later
-- one); a limited queue's claims also take its 'limit:<queue>' row exclusively, one at a
-- time. (MySQL and MariaDB have no shared named locks; a row lock is one.) Rows are created
-- on demand.
CREATE TABLE queue_locks (
    name VARCHAR(80) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Limits of one concurrency key, across every queue.
CREATE TABLE key_limits (
    ckey           VARCHAR(512) NOT NULL PRIMARY KEY,
    max_running    INT          NULL CHECK (max_running > 0),
    rate_limit     INT          NULL CHECK (rate_limit > 0),
    rate_period_ms BIGINT       NULL CHECK (rate_period_ms > 0),
    tokens         DOUBLE       NOT NULL DEFAULT 0,
    refilled_at    BIGINT       NOT NULL COMMENT 'time_ms',
    updated_at     BIGINT       NOT NULL COMMENT 'time_ms',
    CONSTRAINT key_limits_rate_complete CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The try-lock a claim takes on an ordering or concurrency key it decides (SKIP LOCKED: a
-- key another claim is deciding is skipped, never waited for). Rows created on demand.
CREATE TABLE key_locks (
    lkey VARCHAR(520) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Periodic (cron) definitions.
CREATE TABLE periodic (
    name         VARCHAR(128) NOT NULL PRIMARY KEY,
    cron         VARCHAR(256) NOT NULL,
    timezone     VARCHAR(64)  NOT NULL DEFAULT 'UTC',
    queue        VARCHAR(64)  NOT NULL,
    kind         VARCHAR(128) NOT NULL,
    args         LONGTEXT     NOT NULL CHECK (JSON_VALID(args)),
    priority     SMALLINT     NOT NULL DEFAULT 0,
    max_attempts INT          NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    missed       VARCHAR(8)   NOT NULL DEFAULT 'latest' CHECK (missed IN ('skip', 'latest', 'all')),
    next_tick_at BIGINT       NOT NULL COMMENT 'time_ms',
    last_tick_at BIGINT       NULL COMMENT 'time_ms',
    last_job_id  BIGINT       NULL,
    updated_at   BIGINT       NOT NULL COMMENT 'time_ms'
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The registry of live worker processes.
CREATE TABLE workers (
    owner       VARCHAR(200) NOT NULL PRIMARY KEY,
    host        VARCHAR(255) NOT NULL,
    pid         BIGINT       NOT NULL CHECK (pid >= 0),
    queues      LONGTEXT     NOT NULL CHECK (JSON_VALID(queues)),
    concurrency BIGINT       NOT NULL CHECK (concurrency >= 0),
    in_flight   BIGINT       NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    started_at  BIGINT       NOT NULL COMMENT 'time_ms',
    seen_at     BIGINT       NOT NULL COMMENT 'time_ms',
    expires_at  BIGINT       NOT NULL COMMENT 'time_ms'
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Operator actions, newest last.
CREATE TABLE operator_actions (
    id     BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at     BIGINT        NOT NULL COMMENT 'time_ms',
    actor  VARCHAR(200)  NOT NULL,
    action VARCHAR(64)   NOT NULL,
    target VARCHAR(2048) NOT NULL,
    detail LONGTEXT      NOT NULL CHECK (JSON_VALID(detail) AND LENGTH(detail) <= 16384)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Per-minute throughput and wait samples, added by every worker.
CREATE TABLE samples (
    queue       VARCHAR(64) NOT NULL,
    minute_at   BIGINT      NOT NULL COMMENT 'time_ms',
    succeeded   BIGINT      NOT NULL DEFAULT 0,
    failed      BIGINT      NOT NULL DEFAULT 0,
    wait_ms_sum BIGINT      NOT NULL DEFAULT 0,
    wait_count  BIGINT      NOT NULL DEFAULT 0,
    run_ms_sum  BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
