-- progress_many: record running jobs' progress, through progress_fenced() (migration 0018).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 real[] percents, $4 text[] messages
--   (parallel to ids), $5 text owner.
-- Invariants: heartbeat.sql's fence (id + attempt + owner + unexpired lease); the lease is not
-- extended. Rows that do not match are reported as LeaseLost. Callers pass ids sorted.
SELECT id, attempt FROM {{schema}}.progress_fenced($1, $2, $3, $4, $5)
