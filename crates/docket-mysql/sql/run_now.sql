-- run_now: a pending job scheduled for later becomes due now. Parameters: now (ms), id, now.
UPDATE jobs SET run_at = ? WHERE id = ? AND state = 'pending' AND run_at > ?
