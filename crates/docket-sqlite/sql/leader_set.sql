-- leader_set: owner ?1 leads until ?2 (ms). Parameters: ?1 owner, ?2 expires_at (ms).
-- Invariant: the caller checked in this write transaction that ?1 leads already or that
-- the current term expired, so at most one owner leads at any database instant.
INSERT INTO leader (name, owner, expires_at) VALUES ('maintenance', ?1, ?2)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
