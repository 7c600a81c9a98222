-- unique_holder: the unfinished job holding unique key ?1, if any.
-- Parameters: ?1 unique_key. Invariant: at most one row (jobs_unique_key_idx).
SELECT id FROM jobs WHERE unique_key = ?1 AND state IN ('pending', 'running')
