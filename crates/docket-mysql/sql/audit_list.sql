-- audit_list: the latest operator actions, newest first. Parameters: limit.
SELECT at, actor, action, target, detail FROM operator_actions ORDER BY id DESC LIMIT ?
