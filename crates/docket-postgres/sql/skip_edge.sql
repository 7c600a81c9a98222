-- skip_edge: an operator's skip of a held workflow edge, through skip_edge() (migration
-- 0031), which satisfies it once when its parent ended dead or cancelled.
-- Parameters: $1 bigint parent job id, $2 bigint child job id.
-- Returns one row: outcome ('skipped', 'no_edge', 'consumed' or 'parent_<state>').
SELECT {{schema}}.skip_edge($1, $2) AS outcome
