-- lab_setup: (re)create the lab table of the claim experiment, filled with $1 queued jobs.
-- Parameters: {{count}}, the job count (an integer spliced by lab.rs). The lab table is separate from the real jobs table so the
-- experiment never touches real work. Runs as one multi-statement simple query.
DROP TABLE IF EXISTS {{schema}}.lab_jobs;
CREATE TABLE {{schema}}.lab_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text NOT NULL DEFAULT 'queued',
    claims integer NOT NULL DEFAULT 0
);
CREATE INDEX lab_jobs_queued_idx ON {{schema}}.lab_jobs (id) WHERE status = 'queued';
INSERT INTO {{schema}}.lab_jobs (status) SELECT 'queued' FROM generate_series(1, {{count}});
ANALYZE {{schema}}.lab_jobs;
