-- workflow_insert: one enqueued workflow (docket-local's workflow::enqueue_on).
-- Parameters: ?1 name, ?2 how many nodes, ?3 now (ms).
-- Invariant: the graph was checked first (docket_core::workflow::Graph::validate); the
-- table's CHECKs repeat the bounds.
INSERT INTO workflows (name, nodes, created_at) VALUES (?1, ?2, ?3)
