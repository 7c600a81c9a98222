-- park_many: park claimed jobs waiting for signals, through park_fenced() (migration 0019).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 bigint[] delays (ms, until the wait
--   times out), $4 text[] signal names (parallel to ids), $5 text owner.
-- Invariants: snooze_many.sql's fence and budget; due at once when the signal is there.
SELECT id, attempt FROM {{schema}}.park_fenced($1, $2, $3, $4, $5)
