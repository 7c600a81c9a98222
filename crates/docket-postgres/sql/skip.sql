-- skip: set a dead job aside as cancelled, with an entry in its history, through skip_job()
-- (migration 0016).
-- Parameters: $1 bigint id.
SELECT id FROM {{schema}}.skip_job($1)
