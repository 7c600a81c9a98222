-- worker_forget: drops registry rows expired for more than a day. Parameters: now (ms).
DELETE FROM workers WHERE expires_at < ? - 86400000
