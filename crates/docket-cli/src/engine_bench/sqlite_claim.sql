-- The SQLite floor's claim: a batch of ?1 queued jobs, leased for 5 minutes, attempt + 1,
-- in one (autocommit) write transaction. Parameters: ?1 batch, ?2 now (ms).
UPDATE floor_jobs
SET status = 'running', attempts = attempts + 1, locked_until = ?2 + 300000
WHERE id IN (SELECT id FROM floor_jobs
             WHERE queue = 'default' AND status = 'queued' AND run_at <= ?2
             ORDER BY run_at LIMIT ?1)
RETURNING id, attempts
