-- fail_many: record failed attempts, through fail_fenced() (migration 0016).
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text[] classes ('retry' | 'discard' |
--   'cancel'), $4 text[] messages (bounded by the caller; cut again at 4096 characters in the
--   function), $5 bigint[] retry delays in ms (NULL = the job's backoff), $6 text owner.
-- Transitions: cancel, or any failure of a job an operator asked to cancel -> cancelled;
--   discard, or retry with attempt >= max_attempts -> dead; retry otherwise -> pending.
-- Invariants: fenced exactly like complete_many.
SELECT id, attempt FROM {{schema}}.fail_fenced($1, $2, $3, $4, $5, $6)
