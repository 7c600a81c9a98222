-- dead_groups: dead jobs grouped by kind and last error, largest groups first.
-- Parameters: $1 bigint groups to return.
-- Reads at most the 100,000 most recent dead jobs (jobs_finished_idx), so the page stays
-- fast however many have piled up; the counts say "of the latest 100,000".
SELECT kind, coalesce(errors -> -1 ->> 'message', '') AS error, count(*) AS n,
       max(finished_at) AS newest_at, max(id) AS example
FROM (SELECT kind, errors, finished_at, id FROM {{schema}}.jobs
      WHERE state = 'dead' AND finished_at IS NOT NULL
      ORDER BY finished_at DESC LIMIT 100000) d
GROUP BY 1, 2
ORDER BY n DESC, newest_at DESC
LIMIT $1
