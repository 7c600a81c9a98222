-- enqueued_in: kind and args of a job the caller's open transaction enqueued. Parameters: id.
SELECT kind, args FROM jobs WHERE id = ?
