-- node_rewait: a retried node (just made pending by retry.sql, same transaction) waits
-- again while any edge into it waits.
-- Parameters: ?1 job id, ?2 edges still waiting.
UPDATE jobs
SET state = CASE WHEN ?2 > 0 THEN 'waiting' ELSE state END, deps_waiting = ?2
WHERE id = ?1 AND workflow_id IS NOT NULL
