-- errored_jobs: the newest errored jobs for the errors page — up to ?1 dead ones by when
-- they died and up to ?1 retrying ones (pending with an error history) among the 100,000
-- newest pending jobs (no partial index on this server) — with the first and last entries of
-- their histories as JSON text. Parameters: ?1 per state.
(SELECT id, queue, kind, state, JSON_EXTRACT(errors, '$[0]') AS first_error,
        JSON_EXTRACT(errors, '$[last]') AS last_error
 FROM jobs
 WHERE state = 'dead' AND finished_at IS NOT NULL
 ORDER BY finished_at DESC
 LIMIT ?1)
UNION ALL
(SELECT id, queue, kind, state, JSON_EXTRACT(errors, '$[0]') AS first_error,
        JSON_EXTRACT(errors, '$[last]') AS last_error
 FROM (SELECT id, queue, kind, state, errors FROM jobs
       WHERE state = 'pending' ORDER BY id DESC LIMIT 100000) p
 WHERE JSON_LENGTH(errors) > 0
 ORDER BY id DESC
 LIMIT ?1)
