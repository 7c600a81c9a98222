-- periodic_remove: delete periodic definition $1 (jobs already enqueued are kept).
-- Parameters: $1 text name.
DELETE FROM {{schema}}.periodic WHERE name = $1
