-- depth_now: per queue with pending or running jobs, the waiting jobs (pending and due; no
-- job is flagged blocked here) counted up to ?2 + 1, and the running ones.
-- Parameters: ?1 now (ms), ?2 the count cap.
WITH names(queue) AS (
    SELECT DISTINCT queue FROM jobs WHERE state = 'pending'
    UNION SELECT DISTINCT queue FROM jobs WHERE state = 'running'
)
SELECT n.queue,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j
         WHERE j.queue = n.queue AND j.state = 'pending' AND j.run_at <= ?1 LIMIT ?2 + 1)) AS waiting,
       (SELECT count(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running') AS running
FROM names n
ORDER BY n.queue
