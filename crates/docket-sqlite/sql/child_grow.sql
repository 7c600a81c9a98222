-- child_grow: a waiting child gained ?2 edges into it (a spawn's sinks).
-- Parameters: ?1 child job id, ?2 how many.
UPDATE jobs SET deps_waiting = deps_waiting + ?2 WHERE id = ?1 AND state = 'waiting'
