-- key_lock_try: the claim's try-lock on a key it decides ('o:' or 'c:' + key): a row, or
-- none when another claim holds it (SKIP LOCKED) or it does not exist yet.
SELECT 1 FROM key_locks WHERE lkey = ? FOR UPDATE SKIP LOCKED
