-- depth_now: per queue with pending or running jobs, the waiting jobs (pending and due; no
-- job is flagged blocked here) and the running ones: exact index range counts (these servers
-- cannot cap a count in a correlated subquery; the caller caps).
-- Parameters: ?1 now (ms). ?2 (the count cap) is not used here.
WITH names AS (SELECT DISTINCT queue FROM jobs WHERE state IN ('pending', 'running'))
SELECT n.queue,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'pending'
          AND j.run_at <= ?1) AS waiting,
       (SELECT COUNT(*) FROM jobs j WHERE j.queue = n.queue AND j.state = 'running') AS running
FROM names n
ORDER BY n.queue
