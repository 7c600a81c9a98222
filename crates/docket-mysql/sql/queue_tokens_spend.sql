-- queue_tokens_spend: stores a queue's rate bucket after a claim spent from it.
-- Parameters: tokens left, now (ms), queue.
UPDATE queues SET tokens = ?, refilled_at = GREATEST(refilled_at, ?) WHERE name = ?
