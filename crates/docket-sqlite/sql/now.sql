-- now: the database's clock in milliseconds since the Unix epoch (SQLite ≥ 3.42).
-- Read once per write transaction and bound to its statements, so one transaction measures
-- every deadline from one instant. No parameters.
SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)
