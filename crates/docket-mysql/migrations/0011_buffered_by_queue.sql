-- Docket on MariaDB / MySQL, migration 0011: a worker reports its buffered jobs per queue (a
-- JSON array, one count per entry of `queues`), so the queues page can tell a queue's
-- executing jobs from those claimed ahead of a free slot. NULL from a worker older than the
-- column (and no default: MySQL gives a LONGTEXT none).
ALTER TABLE workers ADD COLUMN buffered_by_queue LONGTEXT NULL
    CHECK (buffered_by_queue IS NULL OR JSON_VALID(buffered_by_queue))
