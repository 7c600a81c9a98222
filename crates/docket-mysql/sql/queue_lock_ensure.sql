-- queue_lock_ensure: creates queue ?'s lock row (once per queue's life).
-- INSERT IGNORE only ignores the duplicate here: the name was validated (a queue name of
-- 1-64 characters, or 'limit:' and one).
INSERT IGNORE INTO queue_locks (name) VALUES (?)
