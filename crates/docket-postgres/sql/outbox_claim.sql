-- outbox_claim: a relay's claim through outbox_claim() (migration 0032): unkeyed messages and
-- each key's oldest unpublished one, oldest first, leased and their attempt raised.
-- Parameters: $1 text relay, $2 integer limit, $3 bigint lease (ms).
-- Returns: id, attempt, errors (failed publishes so far), subject, payload (JSON text), key, headers (jsonb or NULL).
SELECT id, attempt, errors, subject, payload, key, headers
FROM {{schema}}.outbox_claim($1, $2, $3)
ORDER BY id
