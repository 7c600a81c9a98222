-- outbox_mark: one acknowledged publish marked, fenced on the claim's attempt.
-- Parameters: ?1 now (ms), ?2 stream sequence, ?3 duplicate (0/1), ?4 id, ?5 attempt,
--   ?6 1 only under the mutant outbox_mark_no_fence (always 0 otherwise).
UPDATE outbox SET published_at = ?1, stream_seq = ?2, duplicate = ?3
WHERE id = ?4 AND (attempt = ?5 OR ?6 = 1) AND published_at IS NULL
