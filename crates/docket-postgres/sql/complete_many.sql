-- complete_many: mark claimed jobs succeeded, through complete_fenced() (migration 0016).
-- Parameters: $1 bigint[] ids, $2 int[] attempts (parallel to ids), $3 text owner.
-- Invariants (decided in the function, where every role's write must pass): compare-and-set
-- on id + attempt + owner + unexpired lease (statement_timestamp(), so a completion inside a
-- long in-transaction handler is judged when it is written). Rows that do not match are left
-- untouched; the caller reports them as LeaseLost. Callers pass ids sorted so concurrent
-- batches lock rows in one order.
SELECT id, attempt FROM {{schema}}.complete_fenced($1, $2, $3)
