-- outbox_stats: the outbox's counts for operators and metrics, each counted up to 100,000
-- (a dashboard refresh or a scrape never walks a whole backlog or a long retention):
-- unpublished messages through the partial indexes outbox_keyed and outbox_unkeyed, the
-- oldest one's age from the first entry of each, published ones (outbox_sent, migration
-- 0034) up to the cap.
-- Returns one row: unpublished, in_flight, failing, oldest_age_ms, published, last_error.
WITH u AS (
    SELECT id, available_at, errors, last_error, relay
    FROM {{schema}}.outbox
    WHERE published_at IS NULL
    LIMIT 100000
), oldest AS (
    SELECT o.created_at
    FROM {{schema}}.outbox o
    WHERE o.id = LEAST(
        (SELECT id FROM {{schema}}.outbox WHERE published_at IS NULL AND key IS NULL ORDER BY id LIMIT 1),
        (SELECT id FROM {{schema}}.outbox WHERE published_at IS NULL AND key IS NOT NULL ORDER BY id LIMIT 1))
)
SELECT
    (SELECT count(*) FROM u) AS unpublished,
    (SELECT count(*) FROM u WHERE relay IS NOT NULL AND available_at > now()) AS in_flight,
    (SELECT count(*) FROM u WHERE errors > 0) AS failing,
    coalesce((SELECT (extract(epoch FROM now() - created_at) * 1000)::bigint FROM oldest), 0) AS oldest_age_ms,
    (SELECT count(*) FROM (SELECT 1 FROM {{schema}}.outbox_sent LIMIT 100000) p) AS published,
    (SELECT last_error FROM u WHERE errors > 0 ORDER BY id DESC LIMIT 1) AS last_error
