-- outbox_origin: the outbox's origin, the first part of every de-duplication id.
SELECT origin FROM outbox_origin LIMIT 1
