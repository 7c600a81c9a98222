-- workflows_prune_empty: deletes up to ?1 workflows with no node left, created over a
-- minute before ?2 (now, ms: a workflow being enqueued has its nodes by then); an open
-- batch is kept (the application may still add to it).
-- Parameters: ?1 batch, ?2 now (ms).
DELETE FROM workflows
WHERE id IN (SELECT * FROM (SELECT w.id FROM workflows AS w
                            WHERE NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.workflow_id = w.id)
                              AND w.created_at < ?2 - 60000
                              AND (w.callbacks IS NULL OR w.closed_at IS NOT NULL)
                            LIMIT ?1) AS empty)
