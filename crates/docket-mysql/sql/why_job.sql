-- why_job: what "why is this job not running?" starts from. Parameters: id.
SELECT id, state, queue, priority, run_at, ordering_key, concurrency_key FROM jobs WHERE id = ?
