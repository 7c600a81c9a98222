-- key_limit_delete: remove the limits of concurrency key $1 (its jobs fall back to their
-- queue's per-key default, or run unlimited).
-- Parameters: $1 text key.
DELETE FROM {{schema}}.key_limits WHERE key = $1
