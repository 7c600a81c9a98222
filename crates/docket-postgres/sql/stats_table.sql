-- stats_table: health of the jobs table (bloat is a queue's chronic illness).
-- No parameters.
SELECT coalesce(n_live_tup, 0) AS live_tuples, coalesce(n_dead_tup, 0) AS dead_tuples,
       last_vacuum, last_autovacuum,
       pg_total_relation_size(format('%I.jobs', '{{schema}}')::regclass) AS total_bytes
FROM pg_stat_user_tables
WHERE schemaname = '{{schema}}' AND relname = 'jobs'
