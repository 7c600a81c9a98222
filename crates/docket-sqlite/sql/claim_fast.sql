-- claim_fast: the claim of a queue with nothing to decide, as one autocommit statement: lease
-- up to ?2 ready jobs of queue ?1 to owner ?3 for ?4 ms, attempt + 1, and return them.
-- Parameters: ?1 queue, ?2 limit, ?3 owner, ?4 lease (ms), ?5 starvation bound in ms (NULL:
--   strict priority order).
-- Returns: one row per leased job, a JSON array by position (rows::claimed decodes it, as it
--   does claimed_rows.sql's elements): [id, attempt, max_attempts, queue, kind, args,
--   metadata, priority, run_at, created_at, lease_expires_at, released]. RETURNING yields the rows in
--   the order they were written, not the claim order; the caller sorts them.
-- Invariants: it writes only when the choice claim.rs would make is the plain prefix of the
--   ready jobs in claim order (priority, run_at, id), and otherwise writes nothing (the
--   caller then runs the full claim, which also sees an empty queue):
--   - the queue has no `queues` row that pauses it, caps its running jobs or meters it (a
--     key limit of the queue only binds keyed jobs, ruled out next);
--   - no ready job of the queue has an ordering or concurrency key (jobs_keyed_ready_idx);
--   - with a starvation bound, the queue's pending jobs share one priority: the starving
--     jobs (oldest first) are then the head of the claim order, so starving-first changes
--     nothing.
--   Each guard is an uncorrelated subquery, evaluated once, before any row changes, inside
--   the statement's own write transaction: nothing can change between the check and the
--   lease. now is the statement's one instant (`unixepoch('subsec')`).
-- Why: the full claim is five hand-offs to the connection's thread while the single writer
--   is held (BEGIN IMMEDIATE, claim_context, claim_lease, claimed_rows, COMMIT); this is one.
UPDATE jobs
SET state = 'running',
    attempt = attempt + 1,
    lease_owner = ?3,
    lease_expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?4,
    attempted_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claim_idx
             WHERE state = 'pending' AND queue = ?1
               AND run_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER)
             ORDER BY priority, run_at, id
             LIMIT ?2)
  AND state = 'pending'
  AND NOT EXISTS (SELECT 1 FROM queues AS q
                  WHERE q.name = ?1
                    AND (q.paused_at IS NOT NULL OR q.max_running IS NOT NULL
                         OR q.rate_limit IS NOT NULL OR q.rate_period_ms IS NOT NULL))
  AND NOT EXISTS (SELECT 1 FROM jobs AS k INDEXED BY jobs_keyed_ready_idx
                  WHERE k.state = 'pending' AND k.queue = ?1
                    AND k.run_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER)
                    AND (k.ordering_key IS NOT NULL OR k.concurrency_key IS NOT NULL))
  AND (?5 IS NULL
       OR (SELECT min(priority) FROM jobs INDEXED BY jobs_claim_idx
           WHERE state = 'pending' AND queue = ?1)
        = (SELECT max(priority) FROM jobs INDEXED BY jobs_claim_idx
           WHERE state = 'pending' AND queue = ?1))
RETURNING json_array(id, attempt, max_attempts, queue, kind, json(args), json(metadata),
                     priority, run_at, created_at, lease_expires_at, released)
