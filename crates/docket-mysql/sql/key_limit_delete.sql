-- key_limit_delete: removes a concurrency key's limits. Parameters: key.
DELETE FROM key_limits WHERE ckey = ?
