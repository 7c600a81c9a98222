-- cancel: a pending job becomes cancelled at once; a running one is asked to stop.
-- Parameters: ?1 id, ?2 state to set ('cancelled' or 'running'), ?3 finished_at (ms or
--   NULL), ?4 now (ms), ?5 errors (JSON).
UPDATE jobs
SET state = ?2, finished_at = ?3, cancel_requested_at = COALESCE(cancel_requested_at, ?4), errors = ?5
WHERE id = ?1 AND state IN ('pending', 'running', 'waiting')
