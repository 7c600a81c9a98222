-- periodic_advance: compare-and-set of a definition's next tick, in the transaction that
-- enqueues the ticks' jobs. Parameters: new next tick, last tick (or NULL), last job id (or
-- NULL), now (ms), name, the next tick read.
UPDATE periodic
SET next_tick_at = ?3, last_tick_at = COALESCE(?4, last_tick_at),
    last_job_id = COALESCE(?5, last_job_id), updated_at = ?6
WHERE name = ?1 AND next_tick_at = ?2
