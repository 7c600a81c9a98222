-- outbox_stats: the outbox's counts for operators and metrics. Unpublished messages are
-- read through the partial indexes outbox_keyed and outbox_unkeyed; published ones are counted up to
-- 1,000,000 (a long retention is not scanned whole on every refresh).
-- Returns one row: unpublished, in_flight, failing, oldest_age_ms, published, last_error.
WITH u AS (
    SELECT id, available_at, errors, last_error, created_at, relay
    FROM {{schema}}.outbox
    WHERE published_at IS NULL
)
SELECT
    (SELECT count(*) FROM u) AS unpublished,
    (SELECT count(*) FROM u WHERE relay IS NOT NULL AND available_at > now()) AS in_flight,
    (SELECT count(*) FROM u WHERE errors > 0) AS failing,
    coalesce((SELECT (extract(epoch FROM now() - min(created_at)) * 1000)::bigint FROM u), 0) AS oldest_age_ms,
    (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.outbox
        WHERE published_at IS NOT NULL LIMIT 1000000) p) AS published,
    (SELECT last_error FROM u WHERE errors > 0 ORDER BY id DESC LIMIT 1) AS last_error
