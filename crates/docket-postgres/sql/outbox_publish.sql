-- outbox_publish: a message written through publish() (migration 0032), which checks it.
-- Parameters: $1 text subject, $2 text payload (JSON), $3 text key (NULL: unordered), $4
--   text headers (a JSON object, NULL: none).
-- Returns one row: id.
SELECT {{schema}}.publish($1, $2::jsonb, $3, $4::jsonb) AS id
