-- prune: delete one bounded batch of finished jobs past their retention.
-- Parameters: $1 text[] states to prune (e.g. {succeeded,cancelled} or {dead}),
--   $2 bigint retention in ms (by finished_at, database clock), $3 bigint batch size.
-- Invariants: only terminal rows; SKIP LOCKED so it never waits on an operator's retry;
-- bounded so each statement's locks and WAL stay small. Uses jobs_finished_idx.
WITH doomed AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = ANY($1::text[])
      AND state IN ('succeeded', 'dead', 'cancelled')
      AND finished_at IS NOT NULL
      AND finished_at < now() - $2 * interval '1 millisecond'
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {{schema}}.jobs AS j
USING doomed
WHERE j.id = doomed.id
