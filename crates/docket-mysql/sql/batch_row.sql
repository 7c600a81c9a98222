-- batch_row: batch ?1 with its counters and callbacks (no row: no such batch).
-- Parameters: ?1 batch id.
SELECT id, name, created_at, closed_at, ended_at, nodes AS total, unfinished, succeeded, dead,
       cancelled, callbacks, on_success_job, on_complete_job, on_failure_job
FROM workflows
WHERE id = ?1 AND callbacks IS NOT NULL
