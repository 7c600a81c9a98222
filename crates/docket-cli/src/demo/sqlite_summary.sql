-- The demo's closing counts on SQLite (as the PostgreSQL demo's): the checks that can fail
-- are `unsent` (a success recorded without its handler's send) and `stray` (a send for a
-- job the queue did not finish); both must be 0.
SELECT
  sum(state = 'succeeded') AS succeeded,
  sum(state = 'succeeded' AND json_array_length(errors) > 0) AS retried,
  sum(state = 'dead') AS dead,
  sum(EXISTS (SELECT 1 FROM json_each(jobs.errors) e
              WHERE json_extract(e.value, '$.class') = 'lease_expired')) AS recovered,
  (SELECT count(*) FROM demo_attempts WHERE deduped) AS deduped,
  (SELECT count(*) FROM (SELECT job_id FROM demo_attempts GROUP BY job_id HAVING count(*) > 1)) AS rerun,
  sum(state = 'succeeded' AND NOT EXISTS (SELECT 1 FROM demo_sends d WHERE d.job_id = jobs.id)) AS unsent,
  (SELECT count(*) FROM demo_sends d
   WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = d.job_id AND j.state = 'succeeded')) AS stray
FROM jobs WHERE queue = 'email'
