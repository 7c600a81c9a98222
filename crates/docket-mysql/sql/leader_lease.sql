-- leader_lease: who holds the maintenance leadership's lease and until when, live or not.
-- No parameters. A plain read for operators (leader_get locks it for leader_try).
SELECT owner, expires_at FROM leader WHERE name = 'maintenance'
