-- now: the server's clock in milliseconds since the Unix epoch. Read once per transaction
-- and bound to its statements. No parameters.
SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)
