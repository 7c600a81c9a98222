-- fenced_state: after a fenced batch write in this transaction, each named job's attempt,
-- state, owner, lease expiry, finish time and cancel request, as one row (a JSON array of
-- [id, attempt, state, lease_owner, lease_expires_at, finished_at, cancel_requested]).
-- Parameters: ?1 JSON array of ids.
SELECT json_group_array(json_array(j.id, j.attempt, j.state, j.lease_owner, j.lease_expires_at,
                                   j.finished_at, json(CASE WHEN j.cancel_requested_at IS NULL THEN 'false' ELSE 'true' END)))
FROM json_each(?1) AS w
JOIN jobs AS j ON j.id = w.value
