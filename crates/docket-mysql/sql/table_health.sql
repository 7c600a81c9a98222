-- table_health: the jobs table's size and InnoDB's row estimate (no dead-tuple or vacuum
-- statistics on these servers).
SELECT CAST(COALESCE(table_rows, 0) AS SIGNED) AS live_tuples,
       CAST(COALESCE(data_length, 0) + COALESCE(index_length, 0) AS SIGNED) AS total_bytes,
       CAST(COALESCE(index_length, 0) AS SIGNED) AS index_bytes
FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = 'jobs'
