-- errored_jobs: the newest errored jobs for the errors page — up to $1 dead ones by when they
-- died (jobs_finished_idx) and up to $1 retrying ones, pending with an error history, newest
-- first (jobs_retrying_idx, migration 0023) — with the first and last entries of their
-- histories. Parameters: $1 bigint per state. The page groups them (fingerprints) in Rust.
(SELECT id, queue, kind, state, errors -> 0 AS first_error, errors -> -1 AS last_error
 FROM {{schema}}.jobs
 WHERE state = 'dead' AND finished_at IS NOT NULL
 ORDER BY finished_at DESC
 LIMIT $1)
UNION ALL
(SELECT id, queue, kind, state, errors -> 0, errors -> -1
 FROM {{schema}}.jobs
 WHERE state = 'pending' AND errors <> '[]'::jsonb
 ORDER BY id DESC
 LIMIT $1)
