-- leader_check: is this session still holding the leader lock? Also proves the connection is
-- alive.
-- Parameters: $1 int lock class, $2 text key ('leader:<schema>').
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
      AND classid = $1::oid AND objid = hashtext($2)::oid AND objsubid = 2
)
