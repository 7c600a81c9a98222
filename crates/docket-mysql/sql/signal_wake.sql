-- signal_wake: makes a job parked waiting for signal ?2 due now: pending, scheduled later, its
-- wait recorded (step docket:wait:NAME) and not yet answered (no step docket:signal:NAME).
-- Parameters: ?1 job id, ?2 signal name, ?3 now (ms). The caller counts the rows (0 or 1).
UPDATE jobs SET run_at = ?3
WHERE id = ?1 AND state = 'pending' AND run_at > ?3
  AND EXISTS (SELECT 1 FROM job_steps WHERE job_id = ?1 AND name = CONCAT('docket:wait:', ?2))
  AND NOT EXISTS (SELECT 1 FROM job_steps WHERE job_id = ?1 AND name = CONCAT('docket:signal:', ?2))
