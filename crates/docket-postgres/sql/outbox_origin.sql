-- outbox_origin: the outbox's origin, the first part of every de-duplication id (0032).
-- Returns one row: origin.
SELECT origin FROM {{schema}}.outbox_origin LIMIT 1
