-- leader_insert: the first term (no row yet). Parameters: ?1 owner, ?2 expires_at (ms).
-- Inside leader_try's write transaction, which read no row: the primary key refuses a
-- second first term (the rules then answer "not leader").
INSERT INTO leader (name, owner, expires_at) VALUES ('maintenance', ?1, ?2)
