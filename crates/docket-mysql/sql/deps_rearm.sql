-- deps_rearm: a retried node's failed edges: satisfied if the parent has since succeeded,
-- waiting again otherwise.
-- Parameters: ?1 child job id.
UPDATE job_deps
SET state = CASE WHEN (SELECT p.state FROM jobs AS p WHERE p.id = job_deps.parent_id) = 'succeeded'
                 THEN 'satisfied' ELSE 'waiting' END
WHERE child_id = ?1 AND state = 'failed'
