-- leader_resign: give up leadership (on shutdown).
-- Parameters: $1 int lock class, $2 text key ('leader:<schema>').
SELECT pg_advisory_unlock($1, hashtext($2))
