-- queue_health: per queue, the retrying jobs (pending with an error history, among the
-- 100,000 newest pending jobs, at most ?2 + 1 read) and the oldest running job's age. No job
-- is flagged blocked here (a claim judges keys as it goes), so there are no blocked reasons.
-- Parameters: ?1 now (ms), ?2 the count cap.
WITH win AS (
    SELECT queue, errors FROM jobs WHERE state = 'pending' ORDER BY id DESC LIMIT 100000
),
retrying AS (
    SELECT queue, count(*) AS n
    FROM (SELECT queue FROM win WHERE json_array_length(errors) > 0 LIMIT ?2 + 1)
    GROUP BY queue
),
running AS (
    SELECT queue, (?1 - min(attempted_at)) / 1000.0 AS oldest
    FROM jobs WHERE state = 'running' AND attempted_at IS NOT NULL GROUP BY queue
),
names AS (SELECT queue FROM retrying UNION SELECT queue FROM running)
SELECT n.queue, coalesce(r.n, 0) AS retrying, u.oldest AS oldest_running_age_s,
       (SELECT coalesce(sum(n), 0) FROM retrying) AS retrying_read,
       (SELECT count(*) FROM win) AS window_read
FROM names n
LEFT JOIN retrying r ON r.queue = n.queue
LEFT JOIN running u ON u.queue = n.queue
ORDER BY n.queue
