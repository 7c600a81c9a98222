-- key_tokens_spend: stores a key's rate bucket after a claim spent from it.
-- Parameters: tokens left, now (ms), key.
UPDATE key_limits SET tokens = ?, refilled_at = GREATEST(refilled_at, ?) WHERE ckey = ?
