-- outbox_stats: the outbox's counts for operators and metrics (published ones counted up to
-- 1,000,000).
-- Parameters: ?1 now (ms).
SELECT
    (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS unpublished,
    (SELECT count(*) FROM outbox WHERE published_at IS NULL AND relay IS NOT NULL AND available_at > ?1) AS in_flight,
    (SELECT count(*) FROM outbox WHERE published_at IS NULL AND errors > 0) AS failing,
    coalesce((SELECT ?1 - min(created_at) FROM outbox WHERE published_at IS NULL), 0) AS oldest_age_ms,
    (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE published_at IS NOT NULL LIMIT 1000000) p) AS published,
    (SELECT last_error FROM outbox WHERE published_at IS NULL AND errors > 0 ORDER BY id DESC LIMIT 1) AS last_error
