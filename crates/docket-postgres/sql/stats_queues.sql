-- stats_queues: per-queue counters for operators: what is old and what is stuck.
-- No parameters. Scans the table once; meant for dashboards and the CLI, not hot paths.
-- One vocabulary with the dashboard and the gauges: pending and ready leave out jobs held by
-- a key (blocked, counted apart); the oldest waiting job is the oldest due one, held or not.
-- Kept successes are counted from their packed history too (migration 0035: one row holds
-- n jobs; the arrays are not read).
-- Ages skip non-finite times (only a write that bypassed the table's checks can store one):
-- `now() - '-infinity'` is an error, and one such row must not break stats for everyone.
SELECT s.*, coalesce(q.paused_at IS NOT NULL, false) AS paused
FROM (
SELECT queue,
       count(*) FILTER (WHERE state = 'pending' AND NOT blocked) AS pending,
       count(*) FILTER (WHERE state = 'pending' AND NOT blocked AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS waiting,
       count(*) FILTER (WHERE state = 'running') AS running,
       coalesce(sum(n) FILTER (WHERE state = 'succeeded'), 0)::bigint AS succeeded,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'pending' AND NOT blocked AND run_at <= now() AND isfinite(run_at)))::float8
           AS oldest_ready_age_s,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'pending' AND run_at <= now() AND isfinite(run_at)))::float8
           AS oldest_waiting_age_s,
       count(*) FILTER (WHERE state = 'running' AND lease_expires_at < now() + interval '10 seconds')
           AS running_near_expiry,
       count(*) FILTER (WHERE state = 'running' AND lease_expires_at < now()) AS running_expired,
       extract(epoch FROM now() - min(finished_at) FILTER (WHERE state = 'dead' AND isfinite(finished_at)))::float8
           AS oldest_dead_age_s,
       count(*) FILTER (WHERE state = 'pending' AND blocked) AS blocked
FROM (SELECT queue, state, blocked, run_at, lease_expires_at, finished_at, 1 AS n
      FROM {{schema}}.jobs
      UNION ALL
      SELECT queue, 'succeeded', false, NULL, NULL, NULL, n FROM {{schema}}.jobs_succeeded) AS j
GROUP BY queue
) s
LEFT JOIN {{schema}}.queues q ON q.name = s.queue
ORDER BY s.queue
