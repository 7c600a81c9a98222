-- dep_insert: one edge of a workflow, waiting.
-- Parameters: ?1 parent job id, ?2 child job id, ?3 workflow id, ?4 policy (cancel, ignore,
--   hold; checked by docket_core::workflow and by the table).
INSERT INTO job_deps (parent_id, child_id, workflow_id, on_failure) VALUES (?1, ?2, ?3, ?4)
