-- leader_update: owner ?1 leads until ?2 (ms). Parameters: ?1 owner, ?2 expires_at (ms).
-- Invariant: the caller checked in this write transaction that ?1 leads already or that
-- the current term expired, so at most one owner leads at any database instant.
UPDATE leader SET owner = ?1, expires_at = ?2 WHERE name = 'maintenance'
