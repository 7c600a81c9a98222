-- claim_lease: leases the chosen jobs to owner ?2 until now + lease, and bumps the attempt
-- (the fencing token every later write compares).
-- Parameters: ?1 JSON array of ids, ?2 owner, ?3 now (ms), ?4 lease (ms).
-- Invariants: runs in the write transaction that chose the ids, so each is still pending;
-- the state guard is kept anyway. claimed_rows.sql reads what they became.
UPDATE jobs
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?2,
    lease_expires_at = ?3 + ?4,
    attempted_at = ?3
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
