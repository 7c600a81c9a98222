-- job_batch: the batch job ?1 is a member of (NULL: none).
-- Parameters: ?1 job id.
SELECT batch_id FROM jobs WHERE id = ?1
