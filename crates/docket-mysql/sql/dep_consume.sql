-- dep_consume: consumes one edge, once: only while it is still waiting.
-- Parameters: ?1 parent job id, ?2 child job id, ?3 'satisfied' or 'failed'.
-- The caller acts on the child only when this changed a row.
UPDATE job_deps SET state = ?3 WHERE parent_id = ?1 AND child_id = ?2 AND state = 'waiting'
