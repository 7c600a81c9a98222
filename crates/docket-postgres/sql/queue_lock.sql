-- queue_lock: take queue $1's control lock exclusively for this transaction; false when it
-- could not be had within about 5 s (the caller then fails with a clear error).
-- Parameters: $1 text queue.
-- Every claim holds the same lock shared while it decides (claim()), so this waits for
-- claims in flight to commit, and claims back off until the caller's change commits. Taken
-- before the change is written, so a claim never holds the control row while waiting for it
-- (no deadlock). Waited for in the lock manager's queue, so claims (which only try) back off
-- meanwhile, but bounded (lock_exclusive_within(), migration 0014): the key is computable and
-- any connection may hold it, and an operator's command must say so rather than hang.
SELECT {{schema}}.lock_exclusive_within({{schema}}.lock_space('queue'), hashtext($1), 5000)
