-- run_now: a pending job scheduled for later becomes due now. Parameters: now (ms), id, now.
UPDATE jobs SET run_at = ?2 WHERE id = ?1 AND state = 'pending' AND run_at > ?2
