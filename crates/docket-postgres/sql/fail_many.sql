-- fail_many: record failed attempts.
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text[] classes ('retry' | 'discard' |
--   'cancel'), $4 text[] messages (bounded by the caller; cut again at 4096 characters here),
--   $5 bigint[] retry delays in ms (NULL = the job's backoff), $6 text owner.
-- Transitions: cancel, or any failure of a job an operator asked to cancel -> cancelled;
--   discard, or retry with attempt >= max_attempts -> dead; retry otherwise -> pending at
--   now() + delay. Every failure appends to the bounded history.
-- Backoff grows with the number of recorded failures (not with attempt, which also counts
-- snoozes and releases).
-- Invariants: fenced exactly like complete_many.
-- The writer's token travels with the write: `attempt = <claimed attempt>` is a no-op while
-- the fence holds, and makes a write that slipped past a broken fence visible to the audit
-- trigger of the invariant checker (docket-testkit) as a change of token.
UPDATE {{schema}}.jobs AS j
SET attempt = f.attempt,
    state = CASE
        WHEN f.class = 'cancel' OR j.cancel_requested_at IS NOT NULL THEN 'cancelled'
        WHEN f.class = 'discard' OR j.attempt >= j.max_attempts THEN 'dead'
        ELSE 'pending' END,
    run_at = CASE
        WHEN f.class = 'retry' AND j.attempt < j.max_attempts AND j.cancel_requested_at IS NULL
        THEN now() + coalesce(f.delay_ms * interval '1 millisecond',
                              {{schema}}.backoff_delay(jsonb_array_length(j.errors) + 1,
                                                       j.backoff_base_ms, j.backoff_cap_ms))
        ELSE j.run_at END,
    finished_at = CASE
        WHEN f.class = 'retry' AND j.attempt < j.max_attempts AND j.cancel_requested_at IS NULL
        THEN NULL
        ELSE now() END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = {{schema}}.push_error(j.errors, jsonb_build_object(
        'attempt', j.attempt - j.released, 'at', now(), 'class', f.class, 'message', left(f.message, 4096),
        'owner', $6::text))
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[])
     AS f(id, attempt, class, message, delay_ms)
WHERE j.id = f.id
  -- state = 'running': implied by lease_owner = owner (CHECK jobs_running_has_lease);
  -- spelled this way so the planner probes the primary key instead of scanning the
  -- partial jobs_lease_idx (predicate state = 'running') with all its dead entries.
  AND j.attempt = f.attempt
  -- Inside coalesce( …, false) (the same truth in a WHERE) so the planner does not
  -- estimate it from the column statistics: analysed while nothing ran, they say no row
  -- has an owner, and a custom plan then scanned the whole table once per id (a nested
  -- loop over a sequential scan: 237 ms for 500 ids at 20,000 rows, 3.5 ms probing the
  -- key). With the default estimate a small table is hashed once, a large one probed.
  AND coalesce(TRUE
  AND j.lease_owner = $6
  AND j.lease_expires_at > statement_timestamp(), false)
RETURNING j.id, j.attempt
