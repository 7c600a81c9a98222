-- batch_fired: batch ?1's callback ?2 ('on_complete', 'on_failure' or 'on_success') was
-- enqueued as job ?3; it never fires again.
-- Parameters: ?1 batch id, ?2 callback, ?3 job id. The CASEs read only arguments.
UPDATE workflows
SET on_complete_job = CASE WHEN ?2 = 'on_complete' THEN ?3 ELSE on_complete_job END,
    on_failure_job = CASE WHEN ?2 = 'on_failure' THEN ?3 ELSE on_failure_job END,
    on_success_job = CASE WHEN ?2 = 'on_success' THEN ?3 ELSE on_success_job END
WHERE id = ?1
