-- reap: return up to $1 expired leases to the queue, or to dead when attempts are exhausted,
-- through reap_expired() (migration 0016).
-- Parameters: $1 bigint batch size.
-- Invariants: only leases that have expired (database clock), taken FOR UPDATE SKIP LOCKED
-- and re-checked on the locked row, so a job being completed right now is never overwritten;
-- a crash consumes the attempt it was claimed with; a job an operator asked to cancel is
-- cancelled rather than requeued.
SELECT id, attempt, lease_owner, state, queue FROM {{schema}}.reap_expired($1)
