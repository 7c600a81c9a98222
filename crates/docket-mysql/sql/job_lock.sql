-- job_lock: locks job ?1's row for the rest of the transaction (an operator's skip of an
-- edge into it takes the child first, as a parent's end does; on SQLite, whose writer is
-- alone, a plain read).
-- Parameters: ?1 job id.
SELECT id FROM jobs WHERE id = ?1
FOR UPDATE
