-- audit_list: the latest operator actions, newest first.
-- Parameters: $1 bigint how many.
SELECT at, actor, action, target, detail FROM {{schema}}.operator_actions ORDER BY id DESC LIMIT $1
