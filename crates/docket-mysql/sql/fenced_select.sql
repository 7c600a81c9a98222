-- fenced_select: of the jobs named, those a claim by ? still holds (owner, lease unexpired by
-- the server's clock), locked until the transaction ends; the caller keeps the rows whose
-- attempt is the claim's and writes only those (the fence).
-- The lease is judged by SYSDATE(3), the clock when the row is read — after any wait for its
-- lock — not by a now read before the wait (a heartbeat that waited 150 ms for a row lock
-- was accepted after its lease, found by the MariaDB audit checker).
-- Parameters: ?1 the ids (a list: one placeholder each), ?2 owner.
-- FORCE INDEX (PRIMARY): by id only, never a jobs_lease range (see claim_lease.sql).
SELECT id, attempt, cancel_requested_at, queue
FROM jobs FORCE INDEX (PRIMARY)
WHERE id IN (?1) AND lease_owner = ?2 AND lease_expires_at > CAST(ROUND(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)
FOR UPDATE
