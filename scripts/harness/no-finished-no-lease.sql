-- Variant for scripts/sql-harness.sh: neither jobs_finished_idx nor jobs_lease_idx (what the
-- two per-job index inserts beyond the floor's cost; not a schema Docket can run: the reaper
-- needs the lease index, prune and the finished listings the other).
DROP INDEX docket.jobs_finished_idx;
DROP INDEX docket.jobs_lease_idx;
