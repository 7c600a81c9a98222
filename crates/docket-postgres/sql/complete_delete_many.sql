-- complete_delete_many: complete claimed jobs by deleting them (a worker that does not keep
-- succeeded jobs, WorkerConfig::keep_succeeded = false, the default), through
-- complete_delete_fenced() (migration 0016).
-- Parameters: $1 bigint[] ids, $2 int[] attempts (parallel to ids), $3 text owner.
-- Invariants: the fence of complete_many.sql, unchanged; a row that does not match is left
-- as it is and the caller reports it as LeaseLost.
-- Why delete: an UPDATE to 'succeeded' writes a new row version and inserts it into the
-- primary key and jobs_finished_idx; a DELETE only stamps the old version (docs/benchmarks.md).
SELECT id, attempt FROM {{schema}}.complete_delete_fenced($1, $2, $3)
