-- Docket on MariaDB / MySQL, migration 0010: a periodic schedule can be paused. While
-- paused_at is set the leader enqueues none of its ticks; resuming clears it, and the ticks
-- that passed follow the definition's `missed` policy.
ALTER TABLE periodic ADD COLUMN paused_at BIGINT NULL COMMENT 'time_ms'
