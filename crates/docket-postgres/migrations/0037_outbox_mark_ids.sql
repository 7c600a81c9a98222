-- Migration 0037: the outbox relay's mark probes the primary key for its ids whatever the
-- table's statistics say.
--
-- Why: outbox_mark() (migration 0034) joins `unnest(p_ids, …)` to outbox on the id alone.
-- Under a long transaction that holds the vacuum horizon back, autoanalyze samples an outbox
-- whose few live rows sit among the dead versions of every message moved to outbox_sent
-- since it began, finds none and records reltuples = 0; planned then (an SQL function is
-- planned at every call), an index scan of outbox costs nothing and the plan walks
-- outbox_pkey whole as the join's outer side, testing every message against every id of the
-- batch. Reproduced on a table ANALYZEd after its rows were deleted, 2,000 messages live and
-- 100,000 dead: a mark of 300 took 125 ms (`Index Scan using outbox_pkey` with no index
-- condition, 599,700 rows removed by the join filter) against 0.35 ms planned on true
-- statistics — the same failure migration 0036 cured in the jobs' fenced writes, and cured
-- the same way: the DELETE also says `o.id = ANY (p_ids)`, so the scan of outbox is the
-- primary key probed for those ids and nothing else, and sequential and bitmap scans are off
-- for the function. Restated whole, unchanged but for that line and those settings.
CREATE OR REPLACE FUNCTION outbox_mark(p_ids bigint[], p_attempts integer[], p_seqs bigint[], p_dups boolean[])
RETURNS bigint
LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off AS $$
    WITH m AS (
        SELECT * FROM unnest(p_ids, p_attempts, p_seqs, p_dups) AS m(id, attempt, seq, dup)
    ), moved AS (
        DELETE FROM outbox o
        USING m
        WHERE o.id = m.id
          AND o.id = ANY (p_ids)
          AND o.attempt = m.attempt
          AND o.published_at IS NULL
        RETURNING o.id, o.subject, o.payload, o.key, o.headers, o.created_at, o.attempt,
                  o.errors, o.last_error, m.seq, m.dup
    ), sent AS (
        INSERT INTO outbox_sent (id, subject, payload, key, headers, created_at, attempt,
                                 errors, last_error, published_at, stream_seq, duplicate)
        SELECT v.id, v.subject,
               CASE WHEN pg_column_size(v.payload) <= 1800 THEN v.payload END,
               v.key, v.headers, v.created_at, v.attempt,
               v.errors, v.last_error, statement_timestamp(), v.seq, v.dup
        FROM moved v
        RETURNING 1
    )
    SELECT count(*) FROM sent
$$;

-- CREATE OR REPLACE resets a function's security and settings: a definer with a pinned path
-- again, as migration 0034 left it (its grants are kept).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION outbox_mark(bigint[], integer[], bigint[], boolean[]) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
