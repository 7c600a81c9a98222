-- periodic_pause: pauses (?2 = 1; the first pause's time stands) or resumes (?2 = 0) the
-- periodic schedule ?1. No row changed: no such schedule.
-- Parameters: ?1 name, ?2 paused (0/1), ?3 now (ms).
UPDATE periodic
SET paused_at = CASE WHEN ?2 = 1 THEN coalesce(paused_at, ?3) ELSE NULL END, updated_at = ?3
WHERE name = ?1
