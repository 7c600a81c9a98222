-- db_now: the database clock. Schedules are computed against it, never a worker's clock.
-- No parameters.
SELECT now()
