-- batch_list: the newest ?1 batches with their counters and callbacks, newest first, by
-- workflows_batches_idx.
-- Parameters: ?1 limit (1..=1000, checked by the caller).
SELECT id, name, created_at, closed_at, ended_at, nodes AS total, unfinished, succeeded, dead,
       cancelled, callbacks, on_success_job, on_complete_job, on_failure_job
FROM workflows
WHERE callbacks IS NOT NULL
ORDER BY id DESC
LIMIT ?1
