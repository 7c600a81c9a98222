-- batch_tally: a member of batch ?1 moved into or out of an end state: its counters move by
-- the deltas (the row lock it takes is what settles the batch once).
-- Parameters: ?1 batch id, ?2 unfinished delta, ?3 succeeded delta, ?4 dead delta,
--   ?5 cancelled delta. The CASE reads only arguments.
UPDATE workflows
SET unfinished = unfinished + ?2, succeeded = succeeded + ?3, dead = dead + ?4,
    cancelled = cancelled + ?5,
    ended_at = CASE WHEN ?2 > 0 THEN NULL ELSE ended_at END
WHERE id = ?1 AND callbacks IS NOT NULL
