-- queue_lock: take queue $1's control lock exclusively for this transaction.
-- Parameters: $1 text queue.
-- Every claim holds the same lock shared while it decides (claim() in migration 0005), so
-- this waits for claims in flight to commit and makes later claims wait until the caller's
-- change commits. Taken before the change is written, so a claim never holds the control
-- row while waiting for it (no deadlock).
SELECT pg_advisory_xact_lock({{schema}}.lock_space('queue'), hashtext($1))
