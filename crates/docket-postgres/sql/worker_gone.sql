-- worker_gone: a stopping worker removes its row (a crashed one expires instead).
-- Parameters: $1 text owner.
DELETE FROM {{schema}}.workers WHERE owner = $1
