-- key_limit_delete: removes concurrency key ?1's limits.
DELETE FROM key_limits WHERE key = ?1
