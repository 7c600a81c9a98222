-- job_links: job ?1's workflow and batch (each NULL when it has none): what an end written
-- inside the caller's transaction, whose row was not read, must follow up.
-- Parameters: ?1 job id.
SELECT workflow_id, batch_id FROM jobs WHERE id = ?1
