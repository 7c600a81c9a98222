-- Docket on MariaDB / MySQL, migration 0012: workflows — graphs of jobs whose nodes wait for
-- their parents (the rules: docket-local's `workflow` module; PostgreSQL: migration 0030).
--
-- * A node with parents is enqueued in the new state 'waiting', which the claim's index
--   prefix (queue, state = 'pending', …) never reaches.
-- * jobs.workflow_id / node / deps_waiting in one ALTER (DDL is not transactional here: one
--   statement is all or nothing); `workflows` (one row per graph); `job_deps` (one row per
--   edge, consumed once: 'waiting' to 'satisfied' or 'failed'). The tables are created
--   only if missing, so a migration cut off between its statements can run again.
ALTER TABLE jobs
    ADD COLUMN workflow_id BIGINT NULL,
    ADD COLUMN node VARCHAR(128) NULL,
    ADD COLUMN deps_waiting INT NULL,
    DROP CONSTRAINT jobs_state_valid,
    ADD CONSTRAINT jobs_state_valid
        CHECK (state IN ('waiting', 'pending', 'running', 'succeeded', 'dead', 'cancelled')),
    ADD CONSTRAINT jobs_node_named CHECK ((workflow_id IS NULL) = (node IS NULL)),
    ADD CONSTRAINT jobs_waiting_has_parents
        CHECK (state <> 'waiting' OR (workflow_id IS NOT NULL AND deps_waiting > 0)),
    ADD KEY jobs_workflow (workflow_id, node);

CREATE TABLE IF NOT EXISTS workflows (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       VARCHAR(128) NOT NULL,
    nodes      INT          NOT NULL,
    created_at BIGINT       NOT NULL COMMENT 'time_ms',
    CONSTRAINT workflows_name CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    CONSTRAINT workflows_nodes CHECK (nodes BETWEEN 1 AND 20000)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS job_deps (
    parent_id   BIGINT      NOT NULL,
    child_id    BIGINT      NOT NULL,
    workflow_id BIGINT      NOT NULL,
    on_failure  VARCHAR(8)  NOT NULL,
    state       VARCHAR(16) NOT NULL DEFAULT 'waiting',
    PRIMARY KEY (parent_id, child_id),
    KEY job_deps_child (child_id),
    KEY job_deps_workflow (workflow_id),
    CONSTRAINT job_deps_policy CHECK (on_failure IN ('cancel', 'ignore', 'hold')),
    CONSTRAINT job_deps_state CHECK (state IN ('waiting', 'satisfied', 'failed'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
