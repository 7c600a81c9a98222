-- leader_insert: the first term (no row yet). Parameters: owner, expires_at (ms).
-- Two first claimants race here: the unique key lets one insert; the other is not leader.
INSERT INTO leader (name, owner, expires_at) VALUES ('maintenance', ?, ?)
