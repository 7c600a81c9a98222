-- Migration 0029: a worker reports its buffered jobs per queue.
--
-- The database says `running` for a job a worker executes and for one it claimed ahead of a
-- free slot (its prefetch buffer); `buffered` (0014) told them apart per worker only, so the
-- queues page could not say how many of a queue's running jobs were executing. One count per
-- entry of `queues`, in its order; empty from a worker older than this column. Additive: an
-- older binary leaves it empty.
ALTER TABLE workers ADD COLUMN buffered_by_queue integer[] NOT NULL DEFAULT '{}';
