-- batch_add: members added to an open batch through batch_add() (migration 0031), which
-- locks the batch row, refuses a closed batch or one past 100,000 members, and counts them.
-- Parameters: $1 bigint batch id, $2 jsonb members (an array of jobs).
-- Returns one row: the members' ids in order.
SELECT {{schema}}.batch_add($1, $2) AS job_ids
