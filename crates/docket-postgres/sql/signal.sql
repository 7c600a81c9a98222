-- signal: send a signal to a job, through signal() (migration 0019; granted like enqueue).
-- Parameters: $1 bigint job id, $2 text name, $3 jsonb payload.
-- Raises P0002 for a missing job and 55000 for a finished one (nothing written); returns
-- whether the signal is new and whether it woke the job.
SELECT new, woke FROM {{schema}}.signal($1, $2, $3)
