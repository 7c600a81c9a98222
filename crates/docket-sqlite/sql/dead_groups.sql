-- dead_groups: dead jobs (the 100,000 most recent) grouped by kind and last error, largest
-- group first. Parameters: ?1 limit.
SELECT kind, coalesce(json_extract(errors, '$[#-1].message'), '') AS error, count(*) AS n,
       max(finished_at) AS newest_at, max(id) AS example
FROM (SELECT kind, errors, finished_at, id FROM jobs
      WHERE state = 'dead' AND finished_at IS NOT NULL
      ORDER BY finished_at DESC LIMIT 100000)
GROUP BY 1, 2
ORDER BY n DESC, newest_at DESC
LIMIT ?1
