-- blocked_keys: ordering keys whose oldest unfinished job is dead, so nothing behind it can
-- run until an operator retries or skips it. With the head job and how many wait behind it.
-- Parameters: $1 bigint limit.
-- Walks jobs_ordering_idx (unfinished keyed jobs in key, id order); an operator query.
SELECT h.ordering_key AS key, h.id AS head, h.queue, h.kind, h.finished_at AS dead_since,
       (SELECT count(*) FROM {{schema}}.jobs w
        WHERE w.ordering_key = h.ordering_key AND w.state = 'pending') AS waiting
FROM (
    SELECT DISTINCT ON (ordering_key) ordering_key, id, state, queue, kind, finished_at
    FROM {{schema}}.jobs
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running', 'dead')
    ORDER BY ordering_key, id
) h
WHERE h.state = 'dead'
ORDER BY h.finished_at, h.ordering_key
LIMIT $1
