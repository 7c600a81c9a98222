-- The SQLite floor's fenced completion of a claimed batch. Parameters: ?1 JSON [[id, attempt]].
UPDATE floor_jobs
SET status = 'done', locked_until = NULL
WHERE (id, attempts) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                          FROM json_each(?1))
  AND status = 'running'
