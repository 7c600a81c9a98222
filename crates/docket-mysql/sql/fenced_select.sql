-- fenced_select: of the jobs named, those a claim by ? still holds (owner, lease unexpired by
-- the server's clock), locked until the transaction ends; the caller keeps the rows whose
-- attempt is the claim's and writes only those (the fence).
-- Parameters: the ids (/*ids*/ expanded), owner, now (ms).
SELECT id, attempt, cancel_requested_at, queue
FROM jobs
WHERE id IN (/*ids*/) AND lease_owner = ? AND lease_expires_at > ?
FOR UPDATE
