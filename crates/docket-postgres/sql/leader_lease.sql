-- leader_lease: who holds the maintenance leadership's lease and until when, live or not, with
-- the database's clock. No parameters. A read for operators; leader_try decides.
SELECT (SELECT owner FROM {{schema}}.leader WHERE name = 'maintenance') AS owner,
       (SELECT expires_at FROM {{schema}}.leader WHERE name = 'maintenance') AS expires_at,
       now() AS now
