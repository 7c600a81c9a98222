-- Docket on SQLite, migration 0014: the transactional outbox — messages for NATS JetStream
-- written inside the application's transaction and published by a relay under a lease and
-- a fencing token (the rules: docket-local's `outbox` module; PostgreSQL: migration 0032).
--
-- * outbox: one row per message; times (TIMEINT) in ms since the epoch. available_at is
--   when a relay may claim it next; attempt the fencing token; relay who holds its lease
--   (NULL once a failed publish released it); published_at / stream_seq set by the fenced
--   mark. The relay walks keyed and unkeyed unpublished messages by two partial indexes.
-- * outbox_origin: one random value, the first part of every de-duplication id.
-- Additive: new tables only.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    key TEXT CHECK (key IS NULL OR length(key) BETWEEN 1 AND 255),
    headers TEXT CHECK (headers IS NULL OR json_valid(headers)),
    created_at TIMEINT NOT NULL,
    available_at TIMEINT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    relay TEXT,
    errors INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    published_at TIMEINT,
    stream_seq INTEGER,
    duplicate INTEGER
);
CREATE INDEX outbox_keyed ON outbox (id) WHERE published_at IS NULL AND key IS NOT NULL;
CREATE INDEX outbox_unkeyed ON outbox (id) WHERE published_at IS NULL AND key IS NULL;
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;
CREATE TABLE outbox_origin (origin TEXT PRIMARY KEY);
INSERT INTO outbox_origin (origin) VALUES (lower(hex(randomblob(8))));
