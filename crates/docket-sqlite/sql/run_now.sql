-- run_now: a pending job scheduled for later becomes due now (attempt and budget untouched).
-- Parameters: ?1 id, ?2 now (ms).
UPDATE jobs SET run_at = ?2 WHERE id = ?1 AND state = 'pending' AND run_at > ?2
