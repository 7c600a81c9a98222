-- batch_open: a batch in one call through batch_open() (migration 0031): its row, its
-- callbacks (each checked by a trial insert), its first members, and its close when asked.
-- Parameters: $1 text name, $2 jsonb callbacks ({"on_success": job, …}), $3 jsonb members
--   (an array of jobs), $4 boolean close.
-- Returns one row: batch_id, job_ids (the members' ids in order).
SELECT batch_id, job_ids FROM {{schema}}.batch_open($1, $2, $3, $4)
