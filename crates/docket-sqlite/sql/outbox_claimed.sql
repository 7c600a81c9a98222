-- outbox_claimed: the messages a claim just leased.
-- Parameters: ?1 ids (a list).
SELECT id, attempt, errors, subject, payload, key, headers FROM outbox
WHERE id IN (SELECT value FROM json_each(?1))
ORDER BY id
