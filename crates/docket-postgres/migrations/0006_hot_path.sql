-- Docket migration 0006: less work per claim for the database, measured in the drain
-- benchmark (docs/benchmarks.md).
--
-- * No planner statistics for the JSON columns. Autovacuum ANALYZEs a busy jobs table often
--   (scale factor 0.05, migration 0001), and most of that time went into detoasting and
--   sorting args, errors and metadata (jsonb_cmp) — about 7 % of the database's CPU during a
--   drain in a system-wide profile. No query filters, joins or sorts on these columns, so
--   their statistics never informed a plan.
-- * claim() plans its statements once per session (a generic plan) instead of re-planning
--   them on every call: PL/pgSQL kept choosing custom plans for the ready-path statement, and
--   planning it (ten indexes to consider) was about 3 % of the database's CPU. Every
--   statement of claim() was written to keep its generic plan on the indexes (see the header
--   of claim() in migration 0005), and the operator test that claims through claim() at 10k
--   and 1M ready jobs fails if a plan stops scaling. claim_controlled keeps the default
--   (`auto`): its statements were tuned under custom plans.

ALTER TABLE jobs
    ALTER COLUMN args SET STATISTICS 0,
    ALTER COLUMN errors SET STATISTICS 0,
    ALTER COLUMN metadata SET STATISTICS 0;

ALTER FUNCTION claim(text, integer, text, bigint, bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION claim_controlled(text, integer, text, bigint, bigint)
    SET plan_cache_mode = auto;
