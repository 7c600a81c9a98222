-- queue_lock_exclusive: the exclusive lock on queue ?'s row: a limited queue's claims (so two
-- claimers never both see the last free slot) and every control change.
SELECT 1 FROM queue_locks WHERE name = ? FOR UPDATE
