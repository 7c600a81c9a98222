-- The SQLite checker's audit: one row per update or delete of a job, with what the rules
-- read (see checker_sqlite.rs). Test files only.
CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL,
    op          TEXT    NOT NULL,
    old_state   TEXT, new_state TEXT,
    old_attempt INTEGER, new_attempt INTEGER,
    old_owner   TEXT, new_owner TEXT,
    old_lease   INTEGER, new_lease INTEGER,
    old_errors  INTEGER, new_errors INTEGER,
    last_class  TEXT,
    old_max     INTEGER, new_max INTEGER,
    at          INTEGER NOT NULL
);
CREATE TRIGGER audit_update AFTER UPDATE ON jobs BEGIN
    INSERT INTO audit (job_id, op, old_state, new_state, old_attempt, new_attempt, old_owner,
                       new_owner, old_lease, new_lease, old_errors, new_errors, last_class,
                       old_max, new_max, at)
    VALUES (NEW.id, 'U', OLD.state, NEW.state, OLD.attempt, NEW.attempt, OLD.lease_owner,
            NEW.lease_owner, OLD.lease_expires_at, NEW.lease_expires_at,
            json_array_length(OLD.errors), json_array_length(NEW.errors),
            json_extract(NEW.errors, '$[#-1].class'), OLD.max_attempts, NEW.max_attempts,
            CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;
CREATE TRIGGER audit_delete AFTER DELETE ON jobs BEGIN
    INSERT INTO audit (job_id, op, old_state, old_attempt, old_owner, old_lease, at)
    VALUES (OLD.id, 'D', OLD.state, OLD.attempt, OLD.lease_owner, OLD.lease_expires_at,
            CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;
