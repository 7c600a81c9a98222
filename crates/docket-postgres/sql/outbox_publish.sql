-- outbox_publish: a message written through publish() (migration 0032), which checks it.
-- Parameters: $1 text subject, $2 jsonb payload, $3 text key (NULL: unordered), $4 jsonb
--   headers (NULL: none).
-- Returns one row: id.
SELECT {{schema}}.publish($1, $2, $3, $4) AS id
