-- heartbeat_fenced() (0016) locks its rows in id order, inside its one statement.
--
-- Its UPDATE ... FROM unnest() visited the rows in its plan's order, which two heartbeats of
-- one worker need not share: one cut off mid-flight (the worker drops a call that outlives
-- its heartbeat interval, while the server still runs it) and the next, with the same ids.
-- PostgreSQL reported a deadlock between two such heartbeats
-- (conformance::a_call_dropped_at_any_await_leaves_no_transaction_open, 2026-12-05).
--
-- The lock is taken by a subquery of the same UPDATE (ORDER BY id FOR UPDATE), not by a
-- statement before it: the statement's BEFORE triggers and any wait before the scan still
-- happen before a row is locked, so a heartbeat stalled there holds nothing and the next
-- one is not queued behind it (faults.rs, a hanging heartbeat is cut off and retried). The
-- fence is unchanged and is checked on the locked, latest row version.

CREATE OR REPLACE FUNCTION heartbeat_fenced(p_ids bigint[], p_attempts integer[], p_owner text,
    p_lease_ms bigint)
RETURNS TABLE (id bigint, attempt integer, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE sql VOLATILE AS $$
    -- A lease that already expired is not revived (the reaper may be handing the job to
    -- someone else), so the worker must stop.
    UPDATE jobs AS j
    SET attempt = c.attempt, lease_owner = p_owner,
        lease_expires_at = now() + greatest(p_lease_ms, 1) * interval '1 millisecond'
    FROM (
        SELECT l.id, u.attempt
        FROM unnest(p_ids, p_attempts) AS u(id, attempt)
        JOIN jobs AS l ON l.id = u.id
        ORDER BY l.id
        FOR UPDATE OF l
    ) AS c
    WHERE j.id = c.id
      AND j.attempt = c.attempt
      AND coalesce(TRUE
      AND j.lease_owner = p_owner
      AND j.lease_expires_at > statement_timestamp(), false)
    RETURNING j.id, j.attempt, j.lease_expires_at, j.cancel_requested_at IS NOT NULL
$$;

-- CREATE OR REPLACE keeps the function's grants but not its definer settings.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION heartbeat_fenced(bigint[], integer[], text, bigint) '
        'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
