-- snooze_many: put claimed jobs back to pending after a delay without consuming their retry
-- budget (also the release of buffered jobs at shutdown, delay 0), through snooze_fenced()
-- (migration 0016). A job an operator asked to cancel is cancelled instead.
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 bigint[] delays in ms, $4 text owner.
-- Invariants: fenced exactly like complete_many; `released` counts the claim as one that did
-- not run (migration 0014).
SELECT id, attempt FROM {{schema}}.snooze_fenced($1, $2, $3, $4)
