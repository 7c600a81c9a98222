-- Docket on SQLite, migration 0011: a worker reports its buffered jobs per queue (a JSON
-- array, one count per entry of `queues`), so the queues page can tell a queue's executing
-- jobs from those claimed ahead of a free slot. NULL from a worker older than the column.
ALTER TABLE workers ADD COLUMN buffered_by_queue TEXT
    CHECK (buffered_by_queue IS NULL OR (json_valid(buffered_by_queue) AND json_type(buffered_by_queue) = 'array'));
