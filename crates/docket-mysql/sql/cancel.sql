-- cancel: a pending job becomes cancelled at once; a running one is asked to stop.
-- Parameters: state to set ('cancelled' or 'running'), finished_at (ms or NULL), now (ms),
--   errors (JSON), id.
UPDATE jobs
SET state = ?, finished_at = ?, cancel_requested_at = COALESCE(cancel_requested_at, ?), errors = ?
WHERE id = ? AND state IN ('pending', 'running')
