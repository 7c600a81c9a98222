-- Docket migration 0002: leader election by a row with an expiry.
--
-- A session advisory lock is released when the session ends, but not when the leader is
-- merely paused (SIGSTOP, a long GC, a frozen VM): its session stays open and nobody else
-- could reap. A leader row with an expiry fails over in both cases; a leader that cannot
-- renew in time simply stops being leader.
CREATE TABLE leader (
    name       text PRIMARY KEY,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
