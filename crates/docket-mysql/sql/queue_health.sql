-- queue_health: per queue, the retrying jobs (pending with an error history, among the
-- 100,000 newest pending jobs: a bounded read, counted whole) and the oldest running job's age. No job
-- is flagged blocked here (a claim judges keys as it goes), so there are no blocked reasons.
-- Parameters: ?1 now (ms). ?2 (the count cap) is not used here (LIMIT takes no expression
--   on these servers; the window bounds the read and the caller caps).
WITH win AS (
    SELECT queue, errors FROM jobs WHERE state = 'pending' ORDER BY id DESC LIMIT 100000
),
retrying AS (
    SELECT queue, COUNT(*) AS n
    FROM (SELECT queue FROM win WHERE JSON_LENGTH(errors) > 0) x
    GROUP BY queue
),
running AS (
    SELECT queue, (?1 - MIN(attempted_at)) / 1000.0 AS oldest
    FROM jobs WHERE state = 'running' AND attempted_at IS NOT NULL GROUP BY queue
),
names AS (SELECT queue FROM retrying UNION SELECT queue FROM running)
SELECT n.queue, COALESCE(r.n, 0) AS retrying, CAST(u.oldest AS DOUBLE) AS oldest_running_age_s,
       CAST((SELECT COALESCE(SUM(n), 0) FROM retrying) AS SIGNED) AS retrying_read,
       (SELECT COUNT(*) FROM win) AS window_read
FROM names n
LEFT JOIN retrying r ON r.queue = n.queue
LEFT JOIN running u ON u.queue = n.queue
ORDER BY n.queue
