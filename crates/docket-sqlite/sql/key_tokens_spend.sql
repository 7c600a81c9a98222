-- key_tokens_spend: stores key ?1's rate bucket after a claim spent from it.
-- Parameters: ?1 key, ?2 tokens left, ?3 now (ms).
UPDATE key_limits SET tokens = ?2, refilled_at = max(refilled_at, ?3) WHERE key = ?1
