-- outbox_claimed: the messages a claim just leased.
-- Parameters: ?1 ids (a list).
SELECT id, attempt, errors, subject, payload, `key` AS `key`, headers FROM outbox
WHERE id IN (?1)
ORDER BY id
