-- outbox_stats: the outbox's counts for operators and metrics, each counted up to 100,000
-- (a dashboard refresh or a scrape never walks a whole backlog or a long retention); the
-- oldest unpublished message's age from the first entry of each walk.
-- Parameters: ?1 now (ms).
WITH u AS (
    SELECT id, available_at, errors, last_error, relay FROM outbox
    WHERE published_at IS NULL
    LIMIT 100000
)
SELECT
    (SELECT count(*) FROM u) AS unpublished,
    (SELECT count(*) FROM u WHERE relay IS NOT NULL AND available_at > ?1) AS in_flight,
    (SELECT count(*) FROM u WHERE errors > 0) AS failing,
    coalesce(?1 - (SELECT created_at FROM outbox WHERE id = (
        SELECT min(id) FROM outbox WHERE published_at IS NULL)), 0) AS oldest_age_ms,
    (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE published_at IS NOT NULL LIMIT 100000) p) AS published,
    (SELECT last_error FROM u WHERE errors > 0 ORDER BY id DESC LIMIT 1) AS last_error
