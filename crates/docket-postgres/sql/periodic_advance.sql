-- periodic_advance: compare-and-set the schedule of $1 from tick $2 to $3, recording the last
-- tick enqueued ($4, NULL when none was).
-- Parameters: $1 text name, $2 timestamptz expected next tick, $3 timestamptz new next tick,
--   $4 timestamptz last tick.
-- Invariant: runs first in the transaction that enqueues the ticks. The row lock orders
-- racing leaders; a loser re-reads the row after the winner commits, matches nothing and
-- rolls back its enqueue — so each tick is enqueued once.
UPDATE {{schema}}.periodic
SET next_tick_at = $3, last_tick_at = coalesce($4, last_tick_at), updated_at = now()
WHERE name = $1 AND next_tick_at = $2
RETURNING name
