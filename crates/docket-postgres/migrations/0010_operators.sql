-- Docket migration 0010: what the dashboard and the metrics read and write (additive).
--
-- * operator_actions: the audit log, every operator action taken through the dashboard (who, what, on what, how many).
-- * samples: per-queue, per-minute work reported by the workers (succeeded, failed, queue
--   wait, run time), so throughput and pickup-latency charts read sixty small rows instead
--   of scanning an hour of finished jobs. Workers add to a minute's row; rows older than a
--   day are deleted by the same statement that writes them.
-- * jobs_dead_idx and jobs_blocked_idx: the dashboard counts dead and key-blocked jobs per
--   queue with a cap, and lists dead jobs newest first; without them each would scan the
--   table. Both are partial on states a job enters rarely, so the claim and completion
--   paths do not maintain them.
CREATE TABLE operator_actions (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 200),
    action text        NOT NULL CHECK (octet_length(action) BETWEEN 1 AND 64),
    target text        NOT NULL CHECK (octet_length(target) BETWEEN 1 AND 2048),
    detail jsonb       NOT NULL DEFAULT '{}' CHECK (octet_length(detail::text) <= 16384)
);

CREATE TABLE samples (
    queue       text        NOT NULL CHECK (octet_length(queue) BETWEEN 1 AND 64),
    minute      timestamptz NOT NULL,
    succeeded   bigint      NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    failed      bigint      NOT NULL DEFAULT 0 CHECK (failed >= 0),
    wait_ms_sum bigint      NOT NULL DEFAULT 0 CHECK (wait_ms_sum >= 0),
    wait_count  bigint      NOT NULL DEFAULT 0 CHECK (wait_count >= 0),
    run_ms_sum  bigint      NOT NULL DEFAULT 0 CHECK (run_ms_sum >= 0),
    PRIMARY KEY (queue, minute)
);
CREATE INDEX samples_minute_idx ON samples (minute);

CREATE INDEX jobs_dead_idx ON jobs (queue, id) WHERE state = 'dead';
CREATE INDEX jobs_blocked_idx ON jobs (queue) WHERE state = 'pending' AND blocked;
