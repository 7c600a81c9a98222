-- key_lock_exists: whether a key's lock row exists (a plain read: no lock).
SELECT EXISTS (SELECT 1 FROM key_locks WHERE lkey = ?)
