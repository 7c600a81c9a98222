-- lab_result: outcome of a lab run: jobs done, jobs claimed more than once, highest claim
-- count, and claims made in total.
-- No parameters.
SELECT count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE claims > 1) AS duplicated,
       coalesce(max(claims), 0) AS max_claims,
       coalesce(sum(claims), 0)::bigint AS total_claims
FROM {{schema}}.lab_jobs
