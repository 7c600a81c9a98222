-- The floor's claim, 3 of 3: the attempts the lease gave (no UPDATE ... RETURNING).
-- Parameters: the ids (/*ids*/ expanded).
SELECT id, attempts FROM floor_jobs WHERE id IN (/*ids*/)
