-- Docket on SQLite, migration 0003: job outputs.
--
-- A handler's result, stored with its job by the fenced completion (sql/complete_output.sql),
-- as JSON text: only on a succeeded job, at most 16 MiB (docket_core::output::MAX_OUTPUT_BYTES;
-- the shared rules refuse more first, with the size). A job with an output is pruned only once
-- past the outputs' retention too (sql/prune.sql).
ALTER TABLE jobs ADD COLUMN output TEXT
    CHECK (output IS NULL OR (json_valid(output) AND length(CAST(output AS BLOB)) <= 16777216
                              AND state = 'succeeded'));
