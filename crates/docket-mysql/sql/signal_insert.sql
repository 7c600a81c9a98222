-- signal_insert: keeps a signal. Run only after job_state.sql found the job unfinished (and,
-- where rows are locked, locked it) and signal_get.sql found no signal of this name.
-- Parameters: ?1 job id, ?2 name, ?3 payload (JSON text), ?4 now (ms).
INSERT INTO job_signals (job_id, name, payload, sent_at) VALUES (?1, ?2, ?3, ?4)
