-- The MariaDB / MySQL floor's claim, 1 of 3 (one transaction): lock a batch, skipping
-- locked rows. Parameters: now (ms), batch.
SELECT id FROM floor_jobs
WHERE queue = 'default' AND status = 'queued' AND run_at <= ?
ORDER BY run_at
LIMIT ?
FOR UPDATE SKIP LOCKED
