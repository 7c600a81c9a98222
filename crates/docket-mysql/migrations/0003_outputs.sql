-- Docket on MariaDB / MySQL, migration 0003: job outputs.
--
-- A handler's result, stored with its job by the fenced completion (sql/complete_output.sql),
-- as JSON text: only on a succeeded job, at most 16 MiB (docket_core::output::MAX_OUTPUT_BYTES;
-- the shared rules refuse more first, with the size). A job with an output is pruned only once
-- past the outputs' retention too (sql/prune.sql). An instant column add (nullable, at the end
-- of the row); the checks read only the new column and state.
ALTER TABLE jobs ADD COLUMN output LONGTEXT NULL;
ALTER TABLE jobs ADD CONSTRAINT jobs_output_json CHECK (output IS NULL OR (JSON_VALID(output) AND LENGTH(output) <= 16777216 AND state = 'succeeded'));
