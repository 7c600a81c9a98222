-- output: a job's state and output, for callers reading a result.
-- Parameters: ?1 id. No row: deleted on completion (a plain success) or past its retention.
SELECT state, output, finished_at FROM jobs WHERE id = ?1
