-- worker_gone: worker ?1 stopped.
DELETE FROM workers WHERE owner = ?1
