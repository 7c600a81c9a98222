-- heartbeat: extend the leases of running jobs to now() + $4 ms, through heartbeat_fenced()
-- (migration 0016).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text owner, $4 bigint lease_ms.
-- Returns the new expiry and whether an operator asked to cancel the job.
-- Invariants: fenced exactly like complete_many; a lease that already expired is not revived
-- (the reaper may be handing the job to someone else), so the worker must stop.
SELECT id, attempt, lease_expires_at, cancel_requested
FROM {{schema}}.heartbeat_fenced($1, $2, $3, $4)
