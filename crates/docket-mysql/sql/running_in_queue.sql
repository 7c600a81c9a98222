-- running_in_queue: running jobs of queue ? (its concurrency limit counts them).
SELECT COUNT(*) FROM jobs WHERE queue = ? AND state = 'running'
