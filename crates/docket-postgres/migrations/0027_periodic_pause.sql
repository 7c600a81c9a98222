-- Migration 0027: a periodic schedule can be paused.
--
-- An operator stopping a nightly report that fails had to remove its definition (and lose
-- it until the application registered it again). While paused_at is set the leader
-- enqueues none of its ticks (periodic_due.sql); resuming clears it, and the ticks that
-- passed meanwhile follow the definition's `missed` policy, as after any outage. Additive:
-- an older binary ignores the column (and would enqueue a paused schedule's ticks).
ALTER TABLE periodic ADD COLUMN paused_at timestamptz;
