-- prune_steps: delete one bounded batch of step records whose job no longer exists, through
-- prune_steps() (migration 0019); returns how many went.
-- Parameters: $1 bigint batch size.
SELECT {{schema}}.prune_steps($1)
