-- candidates_past_held: a further pass of a claim: ready jobs of a queue in claim order
-- (priority, run_at, id), locked (jobs another claim holds are skipped, never waited for),
-- leaving out every job of the keys the earlier passes found held (an ordering key whose
-- head is elsewhere, a concurrency key at its limit or out of tokens), so a deep backlog of
-- one held key cannot fill the walk and hold back the rest.
-- Parameters: queue, now (ms), the held concurrency keys (/*ckeys*/ expanded to one
-- placeholder each; '' alone when none, which no key is), the held ordering keys
-- (/*okeys*/, likewise), how many.
SELECT id, ordering_key, concurrency_key
FROM jobs
WHERE queue = ? AND state = 'pending' AND run_at <= ?
  AND (concurrency_key IS NULL OR concurrency_key NOT IN (/*ckeys*/))
  AND (ordering_key IS NULL OR ordering_key NOT IN (/*okeys*/))
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
