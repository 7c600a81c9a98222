-- leader_try: try to become the maintenance leader of this schema.
-- Parameters: $1 int lock class (Docket's), $2 text key ('leader:<schema>').
-- A session-level advisory lock held on a dedicated connection: leadership ends when the
-- session does, so a worker that loses its connection gives up leadership cleanly and at
-- once, without an expiry to wait out.
SELECT pg_try_advisory_lock($1, hashtext($2))
