-- errored_jobs: the newest errored jobs for the errors page — up to ?1 dead ones by when
-- they died and up to ?1 retrying ones (pending with an error history) among the 100,000
-- newest pending jobs — with the first and last entries of their histories as JSON text.
-- Parameters: ?1 per state.
SELECT * FROM (
    SELECT id, queue, kind, state, json_extract(errors, '$[0]') AS first_error,
           json_extract(errors, '$[#-1]') AS last_error
    FROM jobs
    WHERE state = 'dead' AND finished_at IS NOT NULL
    ORDER BY finished_at DESC
    LIMIT ?1)
UNION ALL
SELECT * FROM (
    SELECT id, queue, kind, state, json_extract(errors, '$[0]') AS first_error,
           json_extract(errors, '$[#-1]') AS last_error
    FROM (SELECT id, queue, kind, state, errors FROM jobs
          WHERE state = 'pending' ORDER BY id DESC LIMIT 100000)
    WHERE json_array_length(errors) > 0
    ORDER BY id DESC
    LIMIT ?1)
