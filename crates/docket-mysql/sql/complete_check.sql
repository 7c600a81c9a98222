-- complete_check: of the jobs named, those succeeded by the given attempt at the given now
-- (what complete_fast.sql applied). Parameters: ?1 now (ms), ?2 the ids (a list).
SELECT id, attempt FROM jobs WHERE finished_at = ?1 AND state = 'succeeded' AND id IN (?2)
