-- why: every gate that holds job $1 now, by the rules claim() and claim_controlled() apply
-- (schema/current.sql), in one statement on one snapshot. No row: no such job.
-- Parameters: $1 bigint id.
-- Columns (NULL where a gate does not apply): the job's state, queue, run_at, blocked flag and seconds until
-- it; the queue's pause time; its max_running with the running count; its rate bucket
-- (tokens now, limit, period); the concurrency key's effective limit (the key's own, else the
-- queue's key_max_running) with its running count, and its rate bucket; the earliest
-- running jobs per queue (JSON [[queue, n], ...], the most first, at most five queues); the earliest
-- unfinished or dead job of the ordering key before this one (or a running one), with its
-- state; and how many ready jobs of the queue a strict-order claim takes first (at most
-- 10,000 counted); and whether a live worker (workers, unexpired) serves its queue.
-- Invariant: reads only; a gate here is a gate there (same columns, same comparisons).
SELECT j.state, j.queue, j.run_at, j.blocked,
       extract(epoch FROM j.run_at - now())::float8 AS run_in_s,
       q.paused_at,
       q.max_running AS queue_max_running,
       CASE WHEN q.max_running IS NOT NULL THEN
           (SELECT count(*) FROM {{schema}}.jobs r WHERE r.state = 'running' AND r.queue = j.queue)
       END AS queue_running,
       CASE WHEN q.rate_limit IS NOT NULL THEN
           {{schema}}.bucket_tokens(q.tokens, q.refilled_at, q.rate_limit, q.rate_period_ms)
       END AS queue_tokens,
       q.rate_limit AS queue_rate_limit, q.rate_period_ms AS queue_rate_period_ms,
       j.concurrency_key,
       coalesce(k.max_running, q.key_max_running) AS key_max_running,
       CASE WHEN j.concurrency_key IS NOT NULL THEN
           (SELECT count(*) FROM {{schema}}.jobs r
            WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key)
       END AS key_running,
       CASE WHEN j.concurrency_key IS NOT NULL THEN
           (SELECT jsonb_agg(jsonb_build_array(s.queue, s.n) ORDER BY s.n DESC, s.queue)
            FROM (SELECT r.queue, count(*) AS n FROM {{schema}}.jobs r
                  WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key
                  GROUP BY r.queue ORDER BY count(*) DESC, r.queue LIMIT 5) s)
       END AS key_running_by_queue,
       CASE WHEN k.rate_limit IS NOT NULL THEN
           {{schema}}.bucket_tokens(k.tokens, k.refilled_at, k.rate_limit, k.rate_period_ms)
       END AS key_tokens,
       k.rate_limit AS key_rate_limit, k.rate_period_ms AS key_rate_period_ms,
       j.ordering_key,
       o.id AS ordering_ahead_id, o.state AS ordering_ahead_state,
       CASE WHEN j.state = 'pending' AND j.run_at <= now() THEN
           (SELECT count(*) FROM (
                SELECT 1 FROM {{schema}}.jobs r
                WHERE r.state = 'pending' AND NOT r.blocked AND r.queue = j.queue
                  AND r.run_at <= now() AND r.id <> j.id
                  AND (r.priority, r.run_at, r.id) < (j.priority, j.run_at, j.id)
                  -- A job of a key out of tokens does not go first: the claim walks past it.
                  AND NOT EXISTS (SELECT 1 FROM {{schema}}.key_limits kl
                                  WHERE kl.key = r.concurrency_key AND kl.rate_limit IS NOT NULL
                                    AND {{schema}}.bucket_tokens(kl.tokens, kl.refilled_at,
                                            kl.rate_limit, kl.rate_period_ms) < 1)
                LIMIT 10000) ahead)
       END AS ahead,
       EXISTS (SELECT 1 FROM {{schema}}.workers w
               WHERE w.expires_at > now() AND j.queue = ANY (w.queues)) AS served
FROM {{schema}}.jobs j
LEFT JOIN {{schema}}.queues q ON q.name = j.queue
LEFT JOIN {{schema}}.key_limits k ON k.key = j.concurrency_key
LEFT JOIN LATERAL (
    SELECT r.id, r.state FROM {{schema}}.jobs r
    WHERE j.ordering_key IS NOT NULL AND r.ordering_key = j.ordering_key AND r.id <> j.id
      AND ((r.id < j.id AND r.state IN ('pending', 'running', 'dead')) OR r.state = 'running')
    ORDER BY r.id
    LIMIT 1
) o ON true
WHERE j.id = $1
