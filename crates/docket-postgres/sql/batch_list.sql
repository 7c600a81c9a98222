-- batch_list: batches with their counters and callbacks, newest first: one batch when $1 is
-- given, else the newest $2 (1..=1000, checked by the caller). Served by the primary key or
-- workflows_batches_idx.
-- Parameters: $1 bigint batch id or NULL, $2 bigint limit.
SELECT id, name, created_at, closed_at, ended_at, nodes::bigint AS total,
       unfinished::bigint AS unfinished, succeeded::bigint AS succeeded, dead::bigint AS dead,
       cancelled::bigint AS cancelled, callbacks, on_success_job, on_complete_job,
       on_failure_job
FROM {{schema}}.workflows
WHERE callbacks IS NOT NULL AND ($1::bigint IS NULL OR id = $1)
ORDER BY id DESC
LIMIT $2
