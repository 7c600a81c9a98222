-- run_now: make a pending job scheduled for later due now (an operator's "retry now"),
-- through run_job_now() (migration 0016).
-- Parameters: $1 bigint id.
-- Returns its queue (for the wake-up notification), no row otherwise. Attempt and budget are
-- untouched.
SELECT queue FROM {{schema}}.run_job_now($1)
