-- complete_check: of the jobs named, those succeeded by the given attempt at the given now
-- (what complete_fast.sql applied). Parameters: now (ms), then the ids (/*ids*/ expanded).
SELECT id, attempt FROM jobs WHERE finished_at = ? AND state = 'succeeded' AND id IN (/*ids*/)
