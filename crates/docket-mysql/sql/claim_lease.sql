-- claim_lease: leases the chosen (locked, pending) jobs and bumps their attempt.
-- Parameters: owner, now (ms), now (ms), lease (ms), then the ids (the list /*ids*/ is
-- expanded to one bound placeholder per id).
UPDATE jobs
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?,
    attempted_at = ?,
    lease_expires_at = ? + ?
WHERE state = 'pending' AND id IN (/*ids*/)
