-- samples_forget: drops samples older than a day. Parameters: ?1 now (ms).
DELETE FROM samples WHERE minute_at < ?1 - 86400000
