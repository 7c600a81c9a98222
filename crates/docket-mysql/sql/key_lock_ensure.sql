-- key_lock_ensure: creates a key's lock row (1-520 bytes, validated).
INSERT IGNORE INTO key_locks (lkey) VALUES (?)
