-- key_running: running jobs of concurrency key ?, across every queue.
SELECT COUNT(*) FROM jobs WHERE concurrency_key = ? AND state = 'running'
