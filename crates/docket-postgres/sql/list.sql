-- list: jobs newest first, optionally filtered.
-- Parameters: $1 text queue or NULL, $2 text state or NULL, $3 bigint limit.
-- Kept successes (migration 0035) come from the $3 most recently finished history rows (each
-- holds at least one job): jobs finish close to id order, so these hold the newest ids; a
-- success finished long after younger jobs can fall outside (search by state succeeded reads
-- the whole history, newest finished first).
SELECT * FROM (
    SELECT id, queue, kind, state, attempt, max_attempts, released, priority, run_at, created_at,
           attempted_at, finished_at, lease_owner, lease_expires_at, cancel_requested_at,
           unique_key, ordering_key, concurrency_key, blocked, args, metadata, errors
    FROM {{schema}}.jobs
    WHERE ($1::text IS NULL OR queue = $1)
      AND ($2::text IS NULL OR state = $2)
    ORDER BY id DESC
    LIMIT $3
) AS live
UNION ALL
SELECT r.id, r.queue, r.kind, 'succeeded'::text, r.attempt, r.max_attempts, r.released,
       r.priority, r.run_at, r.created_at, r.attempted_at, h.finished_at, NULL::text,
       NULL::timestamptz, r.cancel_requested_at, r.unique_key, r.ordering_key,
       r.concurrency_key, false, r.args, r.metadata, r.errors
FROM (SELECT * FROM {{schema}}.jobs_succeeded
      WHERE ($1::text IS NULL OR queue = $1)
        AND ($2::text IS NULL OR $2 = 'succeeded')
      ORDER BY finished_at DESC
      LIMIT $3) AS h,
     unnest(h.jobs) AS r
ORDER BY id DESC
LIMIT $3
