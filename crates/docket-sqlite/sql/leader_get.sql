-- leader_get: the maintenance leader's row.
-- No parameters. Read inside leader_try's write transaction, which decides from it.
SELECT owner, expires_at FROM leader WHERE name = 'maintenance'
