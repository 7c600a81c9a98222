-- audit_insert: keep one operator action.
-- Parameters: $1 text actor, $2 text action, $3 text target, $4 jsonb detail.
-- The time is the database's.
INSERT INTO {{schema}}.operator_actions (actor, action, target, detail) VALUES ($1, $2, $3, $4)
