-- Docket on MariaDB / MySQL, migration 0014: the transactional outbox — messages for NATS
-- JetStream written inside the application's transaction and published by a relay under a
-- lease and a fencing token (the rules: docket-local's `outbox` module; PostgreSQL:
-- migration 0032).
--
-- * outbox: one row per message; times in ms since the epoch. available_at is when a relay
--   may claim it next; attempt the fencing token; relay who holds its lease (NULL once a
--   failed publish released it); published_at / stream_seq set by the fenced mark. No
--   partial indexes here: (published_at, id) serves the relay's walks over the NULLs.
-- * outbox_origin: one random value, the first part of every de-duplication id.
-- Additive: new tables only.
CREATE TABLE outbox (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    subject VARCHAR(255) NOT NULL,
    payload LONGTEXT NOT NULL,
    `key` VARCHAR(255) NULL,
    headers TEXT NULL,
    created_at BIGINT NOT NULL COMMENT 'time_ms',
    available_at BIGINT NOT NULL COMMENT 'time_ms',
    attempt INT NOT NULL DEFAULT 0,
    relay VARCHAR(255) NULL,
    errors INT NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    published_at BIGINT NULL COMMENT 'time_ms',
    stream_seq BIGINT NULL,
    duplicate TINYINT NULL,
    KEY outbox_unpublished (published_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE outbox_origin (
    origin VARCHAR(16) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO outbox_origin (origin) VALUES (LOWER(HEX(RANDOM_BYTES(8))));
