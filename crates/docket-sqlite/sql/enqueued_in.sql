-- enqueued_in: kind and args of job ?1 (one the caller's open transaction enqueued).
SELECT kind, args FROM jobs WHERE id = ?1
