-- queue_tokens_spend: stores a queue's rate bucket after a claim spent from it.
-- Parameters: ?1 queue, ?2 tokens left, ?3 now (ms).
UPDATE queues SET tokens = ?2, refilled_at = GREATEST(refilled_at, ?3) WHERE name = ?1
