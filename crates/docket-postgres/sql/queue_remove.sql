-- queue_remove: forget queue $1's control row (pause, limits, rate bucket) when no job of it
-- is pending (ready, scheduled or blocked) or running. Parameters: $1 text queue. Run after
-- queue_lock in the same transaction. Returns the name when removed; no row when there was
-- none or when work remains. Each test is a probe of a partial index (jobs_age_idx,
-- jobs_blocked_idx; running jobs are few), never a scan of the table.
DELETE FROM {{schema}}.queues AS q
WHERE q.name = $1
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                  WHERE j.queue = $1 AND j.state = 'pending' AND NOT j.blocked)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                  WHERE j.queue = $1 AND j.state = 'pending' AND j.blocked)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                  WHERE j.queue = $1 AND j.state = 'running')
RETURNING q.name
