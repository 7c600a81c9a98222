-- prune: delete one bounded batch of finished jobs past their retention, through
-- prune_finished() (migrations 0016, 0018); returns how many went.
-- Parameters: $1 text[] states to prune (e.g. {succeeded,cancelled} or {dead}),
--   $2 bigint retention in ms (by finished_at, database clock), $3 bigint the outputs'
--   retention in ms (a row with an output is kept past both), $4 bigint batch size.
-- Invariants: only terminal rows; SKIP LOCKED so it never waits on an operator's retry.
SELECT {{schema}}.prune_finished($1, $2, $3, $4)
