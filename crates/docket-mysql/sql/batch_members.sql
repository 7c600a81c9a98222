-- batch_members: which of the jobs ?1 are batch members, and of which batch (a batch of
-- workflow nodes being completed: one read instead of one per node).
-- Parameters: ?1 job ids (a list).
SELECT id, batch_id FROM jobs WHERE id IN (?1) AND batch_id IS NOT NULL
