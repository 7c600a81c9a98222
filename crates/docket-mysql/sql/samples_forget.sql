-- samples_forget: drops samples older than a day. Parameters: now (ms).
DELETE FROM samples WHERE minute_at < ? - 86400000
