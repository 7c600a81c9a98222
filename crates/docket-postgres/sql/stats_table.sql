-- stats_table: health of the jobs table (bloat is a queue's chronic illness).
-- No parameters.
-- The statistics functions on the table's own oid, not the pg_stat_user_tables view: the view
-- groups over every table of the database before filtering, which took 300 ms on a server with
-- a few thousand tables (measured on the shared test server); this takes about 2 ms whatever
-- the number of tables. No row when the table is missing (to_regclass gives NULL).
SELECT coalesce(pg_stat_get_live_tuples(t.oid), 0) AS live_tuples,
       coalesce(pg_stat_get_dead_tuples(t.oid), 0) AS dead_tuples,
       pg_stat_get_last_vacuum_time(t.oid) AS last_vacuum,
       pg_stat_get_last_autovacuum_time(t.oid) AS last_autovacuum,
       pg_total_relation_size(t.oid) AS total_bytes,
       pg_indexes_size(t.oid) AS index_bytes
FROM (SELECT to_regclass(format('%I.jobs', '{{schema}}'))::oid AS oid) t
WHERE t.oid IS NOT NULL
