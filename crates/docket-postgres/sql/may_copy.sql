-- may_copy: whether this connection's role may insert into jobs directly, as COPY must.
-- No parameters. Since migration 0016 the worker role writes jobs only through functions
-- (`docket grant` revokes its table writes) and the application role never could: a large
-- batch from either goes through enqueue_many.sql instead. One probe per COPY-sized batch
-- (1,000 jobs or more), on the caller's connection (the role of its transaction).
SELECT has_table_privilege('{{schema}}.jobs', 'INSERT')
