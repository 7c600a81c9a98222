-- Docket migration 0012: a job's input rules are checked when its input is written, not on
-- every claim and completion.
--
-- PostgreSQL evaluates every CHECK constraint of a row on every UPDATE of it, whichever
-- columns the UPDATE names. Thirteen of the table's CHECKs (migrations 0001, 0003, 0005 and
-- 0008) judge the job's input — sizes of args, metadata and errors (each a jsonb document
-- serialised to text to be measured), lengths of queue, kind and keys, priority, max_attempts
-- and backoff ranges — which only an enqueue, an operator's edit or a failure's error entry
-- can change. A claim and a completion re-checked all of them for every job: the whole
-- `args` document turned into text twice per job for nothing, a cost that grows with the
-- payload. Measured with Docket's own claim and completion under pgbench
-- (`scripts/sql-harness.sh 200000 VARIANT 3`, alternating): 40.3k / 40.0k / 43.3k jobs/s
-- with the CHECKs, 44.9k / 51.6k / 43.1k with these rules in the trigger below.
--
-- The same rules, with the same names, now live in one AFTER trigger that fires only for an
-- INSERT (every path: the enqueue functions, COPY, a direct INSERT by any role) or an
-- UPDATE that names one of the input columns (`UPDATE OF`: a direct UPDATE of args by a
-- hostile role still fires it, even one that writes the same value). Its WHEN clause is the
-- rules themselves, so a row that passes queues no trigger event and calls no function; a
-- row that breaks one fails its statement with SQLSTATE 23514 (check_violation) and the
-- rule's old constraint name, exactly as the CHECK did (src/errors.rs maps the names to
-- messages; an older binary reading this schema sees the same errors). An AFTER trigger, not
-- a BEFORE one: COPY gives up its multi-row inserts when a table has a BEFORE ROW trigger.
-- A rule holds when it is true or NULL, as a CHECK does (NULL keys and backoffs pass).
--
-- The rules that the hot writes do change stay CHECKs: state, lease and finish consistency,
-- attempt within budget, finite times and the time range. NOT VALID rows of migration 0008
-- are not re-judged: a row that broke a rule before it existed is shown, never fatal
-- (rows.rs), and fires this trigger only when its input is written again.

ALTER TABLE jobs
    DROP CONSTRAINT jobs_queue_length,
    DROP CONSTRAINT jobs_kind_length,
    DROP CONSTRAINT jobs_max_attempts_positive,
    DROP CONSTRAINT jobs_priority_range,
    DROP CONSTRAINT jobs_args_size,
    DROP CONSTRAINT jobs_metadata_object,
    DROP CONSTRAINT jobs_metadata_size,
    DROP CONSTRAINT jobs_errors_array,
    DROP CONSTRAINT jobs_errors_size,
    DROP CONSTRAINT jobs_unique_key_length,
    DROP CONSTRAINT jobs_ordering_key_length,
    DROP CONSTRAINT jobs_concurrency_key_length,
    DROP CONSTRAINT jobs_backoff_range;

-- Runs only for a row that broke a rule (the trigger's WHEN): names the first rule it broke.
-- The rules are written twice, here and in the WHEN clause below (a WHEN clause cannot call
-- back into a list), in the same order; tests/hostile.rs breaks each one.
CREATE FUNCTION jobs_input_rejected() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN (octet_length(NEW.queue) BETWEEN 1 AND 64) IS FALSE THEN 'jobs_queue_length'
        WHEN (octet_length(NEW.kind) BETWEEN 1 AND 128) IS FALSE THEN 'jobs_kind_length'
        WHEN (NEW.max_attempts > 0) IS FALSE THEN 'jobs_max_attempts_positive'
        WHEN (NEW.priority BETWEEN -100 AND 100) IS FALSE THEN 'jobs_priority_range'
        WHEN (octet_length(NEW.args::text) <= 262144) IS FALSE THEN 'jobs_args_size'
        WHEN (jsonb_typeof(NEW.metadata) = 'object') IS FALSE THEN 'jobs_metadata_object'
        WHEN (octet_length(NEW.metadata::text) <= 16384) IS FALSE THEN 'jobs_metadata_size'
        WHEN (jsonb_typeof(NEW.errors) = 'array') IS FALSE THEN 'jobs_errors_array'
        WHEN (octet_length(NEW.errors::text) <= 262144) IS FALSE THEN 'jobs_errors_size'
        WHEN (octet_length(NEW.unique_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_unique_key_length'
        WHEN (octet_length(NEW.ordering_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_ordering_key_length'
        WHEN (octet_length(NEW.concurrency_key) BETWEEN 1 AND 512) IS FALSE THEN 'jobs_concurrency_key_length'
        ELSE 'jobs_backoff_range'
    END;
    -- No DETAIL with the row: the client's message must never carry job data.
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, rule
        USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = TG_TABLE_NAME,
              SCHEMA = TG_TABLE_SCHEMA;
END
$$;

CREATE TRIGGER jobs_input_rules
AFTER INSERT OR UPDATE OF queue, kind, args, metadata, errors, priority, max_attempts,
    backoff_base_ms, backoff_cap_ms, ordering_key, concurrency_key, unique_key
ON jobs FOR EACH ROW
WHEN ((octet_length(NEW.queue) BETWEEN 1 AND 64) IS FALSE
   OR (octet_length(NEW.kind) BETWEEN 1 AND 128) IS FALSE
   OR (NEW.max_attempts > 0) IS FALSE
   OR (NEW.priority BETWEEN -100 AND 100) IS FALSE
   OR (octet_length(NEW.args::text) <= 262144) IS FALSE
   OR (jsonb_typeof(NEW.metadata) = 'object') IS FALSE
   OR (octet_length(NEW.metadata::text) <= 16384) IS FALSE
   OR (jsonb_typeof(NEW.errors) = 'array') IS FALSE
   OR (octet_length(NEW.errors::text) <= 262144) IS FALSE
   OR (octet_length(NEW.unique_key) BETWEEN 1 AND 512) IS FALSE
   OR (octet_length(NEW.ordering_key) BETWEEN 1 AND 512) IS FALSE
   OR (octet_length(NEW.concurrency_key) BETWEEN 1 AND 512) IS FALSE
   OR (coalesce(NEW.backoff_base_ms BETWEEN 1 AND 604800000, true)
       AND coalesce(NEW.backoff_cap_ms BETWEEN coalesce(NEW.backoff_base_ms, 1) AND 2592000000, true)) IS FALSE)
EXECUTE FUNCTION jobs_input_rejected();
