-- queue_lock_exclusive: the exclusive lock on a lock row: a queue's own for every control
-- change, its 'limit:<queue>' row for a limited queue's claims (so two claimers never both
-- see the last free slot).
SELECT 1 FROM queue_locks WHERE name = ? FOR UPDATE
