-- queue_tokens_spend: stores queue ?1's rate bucket after a claim spent from it.
-- Parameters: ?1 queue, ?2 tokens left, ?3 now (ms).
UPDATE queues SET tokens = ?2, refilled_at = max(refilled_at, ?3) WHERE name = ?1
