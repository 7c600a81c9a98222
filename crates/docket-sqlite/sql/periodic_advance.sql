-- periodic_advance: compare-and-set of a definition's next tick, in the transaction that
-- enqueues the ticks' jobs (a tick is enqueued once however many leaders try).
-- Parameters: ?1 name, ?2 the next tick read, ?3 the new next tick, ?4 last tick or NULL,
--   ?5 the last job's id or NULL, ?6 now (ms).
UPDATE periodic
SET next_tick_at = ?3, last_tick_at = coalesce(?4, last_tick_at),
    last_job_id = coalesce(?5, last_job_id), updated_at = ?6
WHERE name = ?1 AND next_tick_at = ?2
