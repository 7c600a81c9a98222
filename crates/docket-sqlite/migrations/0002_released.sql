-- Docket on SQLite, migration 0002: attempts that count runs; buffered jobs reported apart.
--
-- A release (a buffered job given back, a shutdown release) and a snooze raise `attempt`, the
-- fencing token that never goes down, and `max_attempts`, to give the budget back. `released`
-- counts those claims, so a user sees attempt - released of max_attempts - released: the
-- job's runs (sql/snooze_many.sql raises it). The budget rules are unchanged.
ALTER TABLE jobs ADD COLUMN released INTEGER NOT NULL DEFAULT 0;

-- A worker reports how many of the jobs it holds wait in its prefetch buffer (claimed, not
-- yet started), so operators can tell executing from buffered.
ALTER TABLE workers ADD COLUMN buffered INTEGER NOT NULL DEFAULT 0;
