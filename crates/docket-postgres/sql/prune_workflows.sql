-- prune_workflows: delete one bounded batch of workflow edges into nodes that no longer
-- exist, and of workflows with no node left, through prune_workflows() (migration 0030);
-- returns how many rows went.
-- Parameters: $1 bigint batch size.
SELECT {{schema}}.prune_workflows($1)
