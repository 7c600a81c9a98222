-- leader_get: the maintenance leader's row, locked for leader_try's decision.
SELECT owner, expires_at FROM leader WHERE name = 'maintenance' FOR UPDATE
