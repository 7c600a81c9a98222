-- run_now: make a pending job scheduled for later due now (an operator's "retry now").
-- Parameters: $1 bigint id.
-- Only a pending job whose run_at is in the future; returns its queue (for the wake-up
-- notification), no row otherwise. Attempt and budget are untouched.
UPDATE {{schema}}.jobs
SET run_at = now()
WHERE id = $1 AND state = 'pending' AND run_at > now()
RETURNING queue
