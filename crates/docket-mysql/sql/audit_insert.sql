-- audit_insert: keeps one operator action. Parameters: now (ms), actor, action, target,
-- detail (JSON).
INSERT INTO operator_actions (at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)
