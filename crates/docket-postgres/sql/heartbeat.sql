-- heartbeat: extend the leases of running jobs to now() + $4 ms.
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text owner, $4 bigint lease_ms.
-- Returns the new expiry and whether an operator asked to cancel the job.
-- Invariants: fenced exactly like complete_many; a lease that already expired is not revived
-- (the reaper may be handing the job to someone else), so the worker must stop.
-- The writer's token travels with the write: `attempt = <claimed attempt>` and `lease_owner = <owner>` are no-ops while
-- the fence holds, and make a write that slipped past a broken fence visible to the audit
-- trigger of the invariant checker (docket-testkit) as a change of token.
UPDATE {{schema}}.jobs AS j
SET attempt = c.attempt, lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 millisecond'
FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
WHERE j.id = c.id
  -- state = 'running': implied by lease_owner = owner (CHECK jobs_running_has_lease);
  -- spelled this way so the planner probes the primary key instead of scanning the
  -- partial jobs_lease_idx (predicate state = 'running') with all its dead entries.
  AND j.attempt = c.attempt
  -- Inside coalesce( …, false) (the same truth in a WHERE) so the planner does not
  -- estimate it from the column statistics: analysed while nothing ran, they say no row
  -- has an owner, and a custom plan then scanned the whole table once per id (a nested
  -- loop over a sequential scan: 237 ms for 500 ids at 20,000 rows, 3.5 ms probing the
  -- key). With the default estimate a small table is hashed once, a large one probed.
  AND coalesce(TRUE
  AND j.lease_owner = $3
  AND j.lease_expires_at > statement_timestamp(), false)
RETURNING j.id, j.attempt, j.lease_expires_at, j.cancel_requested_at IS NOT NULL AS cancel_requested
