-- outbox_lease: the claimed messages leased to a relay, each attempt raised by one.
-- Parameters: ?1 ids (a list), ?2 relay, ?3 lease end (ms).
UPDATE outbox SET attempt = attempt + 1, relay = ?2, available_at = ?3
WHERE id IN (SELECT value FROM json_each(?1))
