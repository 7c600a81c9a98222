-- horizon_age: how many transactions old the oldest snapshot is that keeps this database's
-- dead row versions from being vacuumed — a backend's snapshot or transaction id (a long
-- transaction, a connection idle in one, a walsender's standby feedback), a replication
-- slot's, a prepared transaction's; 0 when none is open. No parameters. Read by the claim
-- (src/scan_hint.rs) only after an unhinted claim was slow: backend_xmin, backend_xid and the
-- slots are visible to every role.
SELECT coalesce(greatest(
    (SELECT greatest(max(age(backend_xmin)), max(age(backend_xid))) FROM pg_stat_activity
     WHERE datid = (SELECT oid FROM pg_database WHERE datname = current_database())),
    (SELECT max(age(xmin)) FROM pg_replication_slots
     WHERE database IS NULL OR database = current_database()),
    (SELECT max(age(transaction)) FROM pg_prepared_xacts
     WHERE database = current_database())
), 0)::bigint
