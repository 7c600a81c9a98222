-- complete_many: mark claimed jobs succeeded.
-- Parameters: $1 bigint[] ids, $2 int[] attempts (parallel to ids), $3 text owner.
-- Invariants: compare-and-set on id + state = running + attempt + owner + unexpired lease
-- (database clock; statement_timestamp, not now(), so a completion inside a long
-- in-transaction handler is judged at the moment it is written, not when the transaction
-- began). Rows that do not match are left untouched; the caller reports them as
-- LeaseLost. Callers pass ids sorted so concurrent batches lock rows in one order.
-- Plan: one primary-key probe per id. Mentioning state = 'running' here would let the
-- planner scan jobs_lease_idx (every running lease plus its dead entries) and hash-join it
-- instead, which measured 8x slower per row under load; the owner test carries it.
-- The writer's token travels with the write: `attempt = <claimed attempt>` is a no-op while
-- the fence holds, and makes a write that slipped past a broken fence visible to the audit
-- trigger of the invariant checker (docket-testkit) as a change of token.
UPDATE {{schema}}.jobs AS j
SET state = 'succeeded', attempt = c.attempt, finished_at = statement_timestamp(), lease_owner = NULL, lease_expires_at = NULL
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
RETURNING j.id, j.attempt
