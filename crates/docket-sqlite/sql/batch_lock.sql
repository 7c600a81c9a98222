-- batch_lock: workflow ?1's row before members are added or it is closed, locked so the
-- count and the close are decided by one transaction at a time (on SQLite, whose writer is
-- alone, a plain read). callbacks NULL: a graph, not a batch.
-- Parameters: ?1 workflow id.
SELECT id, nodes, closed_at, callbacks FROM workflows WHERE id = ?1
