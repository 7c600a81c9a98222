-- blocked_keys: ordering keys whose head (oldest unfinished or dead job) is dead, with how
-- many pending jobs wait behind it; longest-held first.
-- Parameters: ?1 limit.
WITH heads AS (
    SELECT ordering_key, min(id) AS id FROM jobs
    WHERE ordering_key IS NOT NULL AND state NOT IN ('succeeded', 'cancelled')
    GROUP BY ordering_key
)
SELECT h.ordering_key AS key, j.id AS head, j.queue, j.kind, j.finished_at AS dead_since,
       (SELECT count(*) FROM jobs w
        WHERE w.ordering_key = h.ordering_key AND w.state = 'pending') AS waiting
FROM heads h JOIN jobs j ON j.id = h.id
WHERE j.state = 'dead'
ORDER BY j.finished_at, h.ordering_key
LIMIT ?1
