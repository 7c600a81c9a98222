-- workflow_names_taken: how many of the names ?2 (a list) workflow ?1 already has.
-- Parameters: ?1 workflow id, ?2 node names (a list).
SELECT count(*) AS n FROM jobs WHERE workflow_id = ?1 AND node IN (?2)
