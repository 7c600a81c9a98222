CREATE TABLE audit (
    seq         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id      BIGINT      NOT NULL,
    op          VARCHAR(1)  NOT NULL,
    old_state   VARCHAR(16), new_state VARCHAR(16),
    old_attempt INT, new_attempt INT,
    old_owner   VARCHAR(200), new_owner VARCHAR(200),
    old_lease   BIGINT, new_lease BIGINT,
    old_errors  INT, new_errors INT,
    last_class  VARCHAR(64),
    old_max     INT, new_max INT,
    at          BIGINT      NOT NULL
) ENGINE = InnoDB;
CREATE TRIGGER audit_update AFTER UPDATE ON jobs FOR EACH ROW
    INSERT INTO audit (job_id, op, old_state, new_state, old_attempt, new_attempt, old_owner,
                       new_owner, old_lease, new_lease, old_errors, new_errors, last_class,
                       old_max, new_max, at)
    VALUES (NEW.id, 'U', OLD.state, NEW.state, OLD.attempt, NEW.attempt, OLD.lease_owner,
            NEW.lease_owner, OLD.lease_expires_at, NEW.lease_expires_at,
            JSON_LENGTH(OLD.errors), JSON_LENGTH(NEW.errors),
            CASE WHEN JSON_LENGTH(NEW.errors) > 0 THEN JSON_UNQUOTE(JSON_EXTRACT(NEW.errors,
                 CONCAT('$[', JSON_LENGTH(NEW.errors) - 1, '].class'))) END,
            OLD.max_attempts, NEW.max_attempts,
            CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED));
CREATE TRIGGER audit_delete AFTER DELETE ON jobs FOR EACH ROW
    INSERT INTO audit (job_id, op, old_state, old_attempt, old_owner, old_lease, at)
    VALUES (OLD.id, 'D', OLD.state, OLD.attempt, OLD.lease_owner, OLD.lease_expires_at,
            CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED));
