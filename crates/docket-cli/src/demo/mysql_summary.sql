-- The demo's closing counts on MariaDB / MySQL (as the PostgreSQL demo's): `unsent` (a
-- success recorded without its handler's send) and `stray` (a send for a job the queue did
-- not finish) must both be 0.
SELECT
  CAST(COUNT(CASE WHEN state = 'succeeded' THEN 1 END) AS SIGNED) AS succeeded,
  CAST(COUNT(CASE WHEN state = 'succeeded' AND JSON_LENGTH(errors) > 0 THEN 1 END) AS SIGNED) AS retried,
  CAST(COUNT(CASE WHEN state = 'dead' THEN 1 END) AS SIGNED) AS dead,
  CAST(COUNT(CASE WHEN JSON_CONTAINS(errors, '{"class": "lease_expired"}') THEN 1 END) AS SIGNED) AS recovered,
  (SELECT CAST(COUNT(*) AS SIGNED) FROM demo_attempts WHERE deduped) AS deduped,
  (SELECT CAST(COUNT(*) AS SIGNED) FROM (SELECT job_id FROM demo_attempts GROUP BY job_id
                                         HAVING COUNT(*) > 1) r) AS rerun,
  CAST(COUNT(CASE WHEN state = 'succeeded'
                   AND NOT EXISTS (SELECT 1 FROM demo_sends d WHERE d.job_id = jobs.id) THEN 1 END)
       AS SIGNED) AS unsent,
  (SELECT CAST(COUNT(*) AS SIGNED) FROM demo_sends d
   WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = d.job_id AND j.state = 'succeeded')) AS stray
FROM jobs WHERE queue = 'email'
