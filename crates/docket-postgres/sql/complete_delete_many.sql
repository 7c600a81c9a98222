-- complete_delete_many: complete claimed jobs by deleting them (a worker that does not keep
-- succeeded jobs, WorkerConfig::keep_succeeded = false, the default).
-- Parameters: $1 bigint[] ids, $2 int[] attempts (parallel to ids), $3 text owner.
-- Invariants: the fence of complete_many.sql, unchanged — id + attempt + owner + unexpired
-- lease by statement_timestamp(); a row that does not match is left as it is and the caller
-- reports it as LeaseLost. Callers pass ids sorted so concurrent batches lock rows in one order.
-- Why delete: an UPDATE to 'succeeded' writes a new row version and inserts it into the
-- primary key and jobs_finished_idx; a DELETE only stamps the old version. Measured with one
-- worker process on library defaults (docs/benchmarks.md, session 17): 0.57–0.68 of the SQL
-- floor completing by UPDATE, 0.70–0.85 by DELETE, alternating binaries.
-- A keyed job (ordering or concurrency key) releases its keys through the trigger
-- jobs_release_keys_on_delete (migration 0013), as an UPDATE to succeeded does.
-- Plan and the coalesce( …, false) wrapper: as complete_many.sql (primary-key probes only).
DELETE FROM {{schema}}.jobs AS j
USING unnest($1::bigint[], $2::int[]) AS c(id, attempt)
WHERE j.id = c.id
  AND j.attempt = c.attempt
  AND coalesce(TRUE
  AND j.lease_owner = $3
  AND j.lease_expires_at > statement_timestamp(), false)
RETURNING j.id, j.attempt
