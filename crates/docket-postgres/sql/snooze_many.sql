-- snooze_many: put claimed jobs back to pending after a delay without consuming their retry
-- budget. Also used to release jobs at shutdown (delay 0). A job an operator asked to cancel
-- is cancelled instead of going back to the queue.
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 bigint[] delays in ms, $4 text owner.
-- The attempt counter is the fencing generation and never goes down, so the budget is given
-- back by raising max_attempts by one instead, and `released` counts the claim as one that
-- did not run (a user sees attempt - released of max_attempts - released: migration 0014).
-- Invariants: fenced exactly like complete_many.
-- The writer's token travels with the write: `attempt = <claimed attempt>` is a no-op while
-- the fence holds, and makes a write that slipped past a broken fence visible to the audit
-- trigger of the invariant checker (docket-testkit) as a change of token.
UPDATE {{schema}}.jobs AS j
SET attempt = s.attempt,
    state = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
    run_at = now() + s.delay_ms * interval '1 millisecond',
    max_attempts = j.max_attempts + 1,
    released = j.released + 1,
    lease_owner = NULL,
    lease_expires_at = NULL
FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS s(id, attempt, delay_ms)
WHERE j.id = s.id
  -- state = 'running': implied by lease_owner = owner (CHECK jobs_running_has_lease);
  -- spelled this way so the planner probes the primary key instead of scanning the
  -- partial jobs_lease_idx (predicate state = 'running') with all its dead entries.
  AND j.attempt = s.attempt
  -- Inside coalesce( …, false) (the same truth in a WHERE) so the planner does not
  -- estimate it from the column statistics: analysed while nothing ran, they say no row
  -- has an owner, and a custom plan then scanned the whole table once per id (a nested
  -- loop over a sequential scan: 237 ms for 500 ids at 20,000 rows, 3.5 ms probing the
  -- key). With the default estimate a small table is hashed once, a large one probed.
  AND coalesce(TRUE
  AND j.lease_owner = $4
  AND j.lease_expires_at > statement_timestamp(), false)
RETURNING j.id, j.attempt
