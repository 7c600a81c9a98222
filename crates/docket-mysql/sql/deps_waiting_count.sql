-- deps_waiting_count: edges into a job still waiting.
-- Parameters: ?1 job id.
SELECT count(*) AS n FROM job_deps WHERE child_id = ?1 AND state = 'waiting'
