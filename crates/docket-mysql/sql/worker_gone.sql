-- worker_gone: a worker stopped. Parameters: owner.
DELETE FROM workers WHERE owner = ?
