-- outbox_lock: of the heads outbox_heads found, those still unpublished and claimable,
-- locked for this claim (MariaDB: FOR UPDATE SKIP LOCKED, so two relays never take one
-- message and a row another relay leased meanwhile is read at its latest version; SQLite:
-- its single writer already serialises claims).
-- Parameters: ?1 ids (a list), ?2 now (ms), ?3 limit.
SELECT id FROM outbox
WHERE id IN (?1) AND published_at IS NULL AND available_at <= ?2
ORDER BY id
LIMIT ?3
FOR UPDATE SKIP LOCKED
