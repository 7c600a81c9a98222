-- batch_grow: batch ?1 gained ?2 members, none of them ended yet.
-- Parameters: ?1 batch id, ?2 how many. The CASE reads only arguments (MariaDB assigns left
-- to right).
UPDATE workflows
SET nodes = nodes + ?2, unfinished = unfinished + ?2,
    ended_at = CASE WHEN ?2 > 0 THEN NULL ELSE ended_at END
WHERE id = ?1
