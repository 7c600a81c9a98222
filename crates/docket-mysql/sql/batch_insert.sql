-- batch_insert: a batch opened empty (docket-local's batches::open).
-- Parameters: ?1 name, ?2 now (ms), ?3 callbacks (JSON text: {"on_success": job, …}).
-- Invariant: the spec was checked first (docket_core::batches::BatchSpec::validate).
INSERT INTO workflows (name, nodes, created_at, callbacks) VALUES (?1, 0, ?2, ?3)
