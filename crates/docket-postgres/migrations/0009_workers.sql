-- Docket migration 0009: a registry of live worker processes (additive).
--
-- Each worker upserts its row every few seconds with an expiry on the database's clock and
-- deletes it when it stops; a crashed one simply expires. Operators list the live ones, and
-- "why is this job not running?" checks that some live worker serves the job's queue. The
-- rows are a report, never a lock: nothing in the claim or the fences reads them.
CREATE TABLE workers (
    owner       text        PRIMARY KEY CHECK (length(owner) BETWEEN 1 AND 200),
    host        text        NOT NULL CHECK (length(host) <= 255),
    pid         integer     NOT NULL CHECK (pid >= 0),
    queues      text[]      NOT NULL CHECK (cardinality(queues) <= 1000),
    concurrency integer     NOT NULL CHECK (concurrency >= 0),
    in_flight   integer     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX workers_expires_idx ON workers (expires_at);
