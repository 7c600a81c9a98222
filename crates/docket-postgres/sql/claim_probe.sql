-- claim_probe: while claims start at a hint (src/scan_hint.rs, migration 0036), look behind it.
-- Parameters: $1 text queue, $2 smallint and $3 timestamptz the hint's claim-order position
--   (priority, run_at), $4 bigint the starvation bound in ms (NULL: none).
-- Returns one row: the position of the first ready job before the hint (NULLs: none), and
-- whether the queue's oldest ready job has waited past the starvation bound. A read that
-- locks nothing, run beside the claims: its walk over the dead entries before the hint (what
-- a held horizon keeps) delays no claim and holds no job. Plain jobs only, as the hinted
-- path: claim_controlled() never takes a hint.
SELECT b.priority, b.run_at,
       coalesce((SELECT o.run_at FROM {{schema}}.jobs AS o
                 WHERE o.state = 'pending' AND NOT o.blocked AND o.queue = $1
                 ORDER BY o.run_at LIMIT 1) <= now() - $4 * interval '1 millisecond',
                false) AS starving
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT j.priority, j.run_at FROM {{schema}}.jobs AS j
    WHERE j.state = 'pending' AND NOT j.blocked AND j.queue = $1 AND j.run_at <= now()
      AND (j.priority, j.run_at) < ($2, $3)
    ORDER BY j.priority, j.run_at
    LIMIT 1
) AS b ON true
