-- Docket migration 0004: the age index behind the fairness policy.
--
-- Priority order alone lets a steady stream of urgent jobs starve everything else. The claim
-- therefore first takes jobs that have been ready for longer than a starvation bound, oldest
-- first, and only then fills the batch by priority. Finding the oldest ready jobs of a queue
-- needs run_at order regardless of priority: this index. It only gains an entry when a row
-- becomes pending (enqueue, retry, release), not on claim or completion.
CREATE INDEX jobs_age_idx ON jobs (queue, run_at, id) WHERE state = 'pending';
