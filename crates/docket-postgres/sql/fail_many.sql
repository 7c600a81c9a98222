-- fail_many: record failed attempts.
-- Parameters: $1 bigint[] ids, $2 int[] attempts, $3 text[] classes ('retry' | 'discard' |
--   'cancel'), $4 text[] messages (already bounded by the caller), $5 bigint[] retry delays in
--   ms (NULL = the job's backoff), $6 text owner.
-- Transitions: cancel -> cancelled; discard, or retry with attempt >= max_attempts -> dead;
--   retry otherwise -> pending at now() + delay. Every failure appends to the bounded history.
-- Invariants: fenced exactly like complete_many.
UPDATE {{schema}}.jobs AS j
SET state = CASE
        WHEN f.class = 'cancel' THEN 'cancelled'
        WHEN f.class = 'discard' OR j.attempt >= j.max_attempts THEN 'dead'
        ELSE 'pending' END,
    run_at = CASE
        WHEN f.class = 'retry' AND j.attempt < j.max_attempts
        THEN now() + coalesce(f.delay_ms * interval '1 millisecond',
                              {{schema}}.backoff_delay(j.attempt, j.backoff_base_ms, j.backoff_cap_ms))
        ELSE j.run_at END,
    finished_at = CASE
        WHEN f.class = 'retry' AND j.attempt < j.max_attempts THEN NULL
        ELSE now() END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    errors = {{schema}}.push_error(j.errors, jsonb_build_object(
        'attempt', j.attempt, 'at', now(), 'class', f.class, 'message', f.message, 'owner', $6::text))
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[])
     AS f(id, attempt, class, message, delay_ms)
WHERE j.id = f.id
  AND j.state = 'running'
  AND j.attempt = f.attempt
  AND j.lease_owner = $6
  AND j.lease_expires_at > statement_timestamp()
RETURNING j.id, j.attempt
