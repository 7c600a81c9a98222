#!/usr/bin/env bash
# Dashboard page timings on a big table: N_PENDING pending jobs (5 queues, some scheduled,
# one in a hundred retrying with an error, one in a thousand blocked behind its ordering key)
# and N_FINISHED finished ones (succeeded, dead
# with errors, cancelled),
# then each page several times, reporting the server time from its Server-Timing header.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/dashboard-bench.sh [N_PENDING] [N_FINISHED]
#
# Defaults: 1,000,000 pending and 10,000,000 finished (about 4 GB, a few minutes to fill).
# Uses its own schema (docket_dashbench), kept for reruns; DROP SCHEMA docket_dashbench CASCADE
# to remove it. Needs target/release/docket (cargo build --release -p docket-queue-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
PENDING=${1:-1000000}
FINISHED=${2:-10000000}
SCHEMA=docket_dashbench
BIN=${BIN:-target/release/docket}
PORT=${PORT:-18089}
export DOCKET_SCHEMA=$SCHEMA

have=$(psql "$DATABASE_URL" -Atc "SELECT count(*) FROM pg_namespace WHERE nspname = '$SCHEMA'")
if [ "$have" = 0 ] || [ "${REFILL:-0}" = 1 ]; then
  psql "$DATABASE_URL" -qc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE"
  "$BIN" migrate >/dev/null
  echo "filling $FINISHED finished jobs..." >&2
  psql "$DATABASE_URL" -q <<SQL
SET search_path = $SCHEMA;
INSERT INTO jobs (queue, kind, args, state, attempt, max_attempts, run_at, created_at, attempted_at, finished_at, errors)
SELECT 'q' || (i % 5), 'kind_' || (i % 20), jsonb_build_object('user_id', i % 100000, 'n', i),
       CASE WHEN i % 1000 = 0 THEN 'dead' WHEN i % 997 = 0 THEN 'cancelled' ELSE 'succeeded' END,
       1, 1, t, t, t, t + interval '5 ms',
       CASE WHEN i % 1000 = 0 THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'at', t, 'class', 'discard',
            'message', 'upstream said ' || (i % 7), 'owner', 'w')) ELSE '[]'::jsonb END
FROM generate_series(1, $FINISHED) i, LATERAL (SELECT now() - interval '30 days' + i * interval '200 ms' AS t) x;
SQL
  echo "filling $PENDING pending jobs..." >&2
  psql "$DATABASE_URL" -q <<SQL
SET search_path = $SCHEMA;
INSERT INTO jobs (queue, kind, args, state, run_at, created_at, priority, errors, ordering_key, blocked)
SELECT 'q' || (i % 5), 'kind_' || (i % 20), jsonb_build_object('user_id', i % 100000, 'n', i), 'pending',
       CASE WHEN i % 10 = 0 THEN now() + interval '1 hour' ELSE now() - interval '1 minute' END,
       now() - interval '1 minute', (i % 3)::smallint,
       -- One in a hundred is retrying: an error history naming its customer (the errors page).
       CASE WHEN i % 100 = 0 THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now() - interval '2 minutes',
            'class', 'retry', 'message', 'no card for customer ' || i || ' (' || (i % 3) || ')', 'owner', 'w'))
            ELSE '[]'::jsonb END,
       -- One in a thousand waits behind an earlier job of its ordering key (flagged blocked).
       CASE WHEN i % 1000 = 1 THEN 'acct-' || (i % 5000) END, i % 1000 = 1 AND i > 5000
FROM generate_series(1, $PENDING) i;
-- Three hours of the leader's depth samples for each queue and for all.
INSERT INTO queue_depth (minute, queue, waiting, running, enqueued, hwm)
SELECT date_trunc('minute', now()) - make_interval(mins => m), q, 180000 + m, 10, 3000, 0
FROM generate_series(1, 180) m, (VALUES ('q0'), ('q1'), ('q2'), ('q3'), ('q4'), ('')) v(q);
VACUUM ANALYZE jobs;
SQL
fi

"$BIN" dashboard --listen 127.0.0.1:$PORT >/tmp/dashbench.log 2>&1 &
DASH=$!
trap 'kill $DASH 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/assets/style.css" && break; sleep 0.2; done

dead_id=$(psql "$DATABASE_URL" -Atc "SELECT max(id) FROM $SCHEMA.jobs WHERE state = 'dead'")
pending_id=$(psql "$DATABASE_URL" -Atc "SELECT max(id) FROM $SCHEMA.jobs WHERE state = 'pending'")
pages=(
  "/"
  "/jobs"
  "/jobs?queue=q1"
  "/jobs?state=pending"
  "/jobs?state=retrying"
  "/jobs?state=scheduled"
  "/jobs?state=running"
  "/jobs?state=dead"
  "/jobs?state=succeeded&queue=q2"
  "/jobs?kind=kind_7"
  "/jobs?field=args.user_id%20%3D%2042"
  "/jobs?queue=q3&field=args.user_id%20%3D%2042"
  "/jobs?before=5000000"
  "/jobs?state=dead&kind=kind_0&error=upstream%20said%200"
  "/jobs?metadata.x=1&field=metadata.tenant%20%3D%20acme"
  "/jobs/$dead_id"
  "/jobs/$pending_id"
  "/dead"
  "/errors"
  "/keys"
  "/workers"
  "/cron"
  "/audit"
  "/metrics"
)
printf '%-48s %10s %10s\n' page "median ms" "max ms"
for p in "${pages[@]}"; do
  ts=()
  for _ in 1 2 3 4 5; do
    t=$(curl -s -D - -o /dev/null "http://127.0.0.1:$PORT$p" | tr -d '\r' | sed -n 's/^server-timing: app;dur=//p')
    [ -z "$t" ] && t=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$PORT$p" | awk '{print $1*1000}')
    ts+=("$t")
  done
  sorted=$(printf '%s\n' "${ts[@]}" | sort -g)
  med=$(echo "$sorted" | sed -n 3p)
  max=$(echo "$sorted" | tail -1)
  printf '%-48s %10s %10s\n' "$p" "$med" "$max"
done
