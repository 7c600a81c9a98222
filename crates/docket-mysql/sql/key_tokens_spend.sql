-- key_tokens_spend: stores a key's rate bucket after a claim spent from it.
-- Parameters: ?1 key, ?2 tokens left, ?3 now (ms).
UPDATE key_limits SET tokens = ?2, refilled_at = GREATEST(refilled_at, ?3) WHERE ckey = ?1
