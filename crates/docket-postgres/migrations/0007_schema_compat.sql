-- 0007: which binaries may use this schema (rolling upgrades).
--
-- A binary that finds migrations newer than it knows keeps working as long as its newest
-- known migration is >= min_reader. Additive migrations (new tables, columns with defaults,
-- new functions and indexes) leave min_reader alone; a migration that changes what an older
-- binary reads or writes carries the line `-- docket: breaking`, and the migrator raises
-- min_reader to that migration's version. See src/migrate.rs.
CREATE TABLE schema_compat (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    min_reader bigint  NOT NULL CHECK (min_reader >= 1)
);
INSERT INTO schema_compat (id, min_reader) VALUES (true, 1);
