-- worker_forget: drops registry rows expired for more than a day. Parameters: ?1 now (ms).
DELETE FROM workers WHERE expires_at < ?1 - 86400000
