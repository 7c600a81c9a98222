-- dead_groups: dead jobs (the 100,000 most recent) grouped by kind and last error, largest
-- group first. Parameters: limit.
SELECT kind, error, COUNT(*) AS n, MAX(finished_at) AS newest_at, MAX(id) AS example
FROM (SELECT kind, finished_at, id,
             COALESCE(CASE WHEN JSON_LENGTH(errors) > 0 THEN JSON_UNQUOTE(JSON_EXTRACT(errors,
                 CONCAT('$[', JSON_LENGTH(errors) - 1, '].message'))) END, '') AS error
      FROM jobs
      WHERE state = 'dead' AND finished_at IS NOT NULL
      ORDER BY finished_at DESC LIMIT 100000) d
GROUP BY kind, error
ORDER BY n DESC, newest_at DESC
LIMIT ?
