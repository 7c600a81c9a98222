-- outbox_fail: a failed publish recorded, fenced; the message released to wait out its
-- retry delay.
-- Parameters: ?1 error, ?2 claimable again at (ms), ?3 id, ?4 attempt.
UPDATE outbox SET errors = errors + 1, relay = NULL, last_error = ?1, available_at = ?2
WHERE id = ?3 AND attempt = ?4 AND published_at IS NULL
