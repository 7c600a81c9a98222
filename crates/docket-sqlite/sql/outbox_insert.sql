-- outbox_insert: a message (docket-local's outbox::publish), checked first
-- (docket_core::outbox::NewMessage::validate).
-- Parameters: ?1 subject, ?2 payload (JSON text), ?3 key or NULL, ?4 headers (JSON object
--   text) or NULL, ?5 now (ms).
INSERT INTO outbox (subject, payload, key, headers, created_at, available_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?5)
