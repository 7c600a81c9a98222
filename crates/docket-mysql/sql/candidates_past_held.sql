-- candidates_past_held: a further pass of a claim: ready jobs of a queue in claim order
-- (priority, run_at, id), locked (jobs another claim holds are skipped, never waited for),
-- leaving out every job of the keys the earlier passes found held (an ordering key whose
-- head is elsewhere, a concurrency key at its limit or out of tokens), so a deep backlog of
-- one held key cannot fill the walk and hold back the rest.
-- Parameters: ?1 queue, ?2 now (ms), ?3 how many, ?4 the held concurrency keys (a list: one
-- placeholder each; '' alone when none, which no key is), ?5 the held ordering keys
-- (likewise).
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2
  AND (concurrency_key IS NULL OR concurrency_key NOT IN (?4))
  AND (ordering_key IS NULL OR ordering_key NOT IN (?5))
ORDER BY priority, run_at, id
LIMIT ?3
FOR UPDATE SKIP LOCKED
