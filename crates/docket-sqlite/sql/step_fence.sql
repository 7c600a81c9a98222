-- step_fence: the claim's check before a step is recorded, inside the write transaction
-- (BEGIN IMMEDIATE: no other writer, the reaper included, runs until it commits).
-- Parameters: ?1 id, ?2 attempt, ?3 owner, ?4 now (ms).
-- A row only while the caller's claim holds the job: same attempt, same owner, lease not
-- expired by the database's clock.
SELECT id FROM jobs WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND lease_expires_at > ?4
