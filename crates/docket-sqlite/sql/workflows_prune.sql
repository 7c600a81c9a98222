-- workflows_prune: deletes up to ?1 workflow edges whose child no longer exists.
-- Parameters: ?1 batch.
DELETE FROM job_deps
WHERE (parent_id, child_id) IN (SELECT * FROM (SELECT d.parent_id, d.child_id FROM job_deps AS d
                                WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = d.child_id)
                                LIMIT ?1) AS doomed)
