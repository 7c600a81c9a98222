-- candidates_past_held: a further pass of a claim: ready jobs of queue ?1 in claim order
-- (priority, run_at, id), leaving out every job of the keys the earlier passes found held
-- (an ordering key whose head is elsewhere, a concurrency key at its limit or out of tokens),
-- so a deep backlog of one held key cannot fill the walk and hold back the rest.
-- Parameters: ?1 queue, ?2 now (ms), ?3 how many, ?4 JSON array of concurrency keys,
--   ?5 JSON array of ordering keys.
SELECT id, ordering_key, concurrency_key
FROM jobs INDEXED BY jobs_claim_idx
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
  AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT value FROM json_each(?4)))
  AND (ordering_key IS NULL OR ordering_key NOT IN (SELECT value FROM json_each(?5)))
ORDER BY priority, run_at, id
LIMIT ?3
