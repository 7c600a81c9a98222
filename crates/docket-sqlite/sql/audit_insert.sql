-- audit_insert: keeps one operator action.
-- Parameters: ?1 now (ms), ?2 actor, ?3 action, ?4 target, ?5 detail (JSON text).
INSERT INTO operator_actions (at, actor, action, target, detail) VALUES (?1, ?2, ?3, ?4, ?5)
