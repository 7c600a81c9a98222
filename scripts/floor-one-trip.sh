#!/usr/bin/env bash
# floor-one-trip.sh — what "one round trip per batch" is worth to the database itself.
#
# The SQL floor (../shared/bench/sql-floor.sh) drains N no-op jobs with C pgbench clients, each
# loop two commits: a claim of B jobs, then the fenced completion of that batch. This script
# runs that loop and a one-trip loop on the same table shape, alternating, R times each: one
# statement (one commit) completes the batch the previous loop claimed — fenced exactly as the
# floor's completion (id, status running, attempt) — and claims the next batch. The ratio
# one-trip / two-commit is the most a queue can gain by completing and claiming in one
# transaction on this machine, whatever its client does (issue 31, part 4).
#
# The one-trip loop can deadlock: its claim (FOR UPDATE SKIP LOCKED) still waits when it
# follows a row's update chain to an in-progress transaction, and its transaction already
# holds the rows it completed, so two or three clients can wait on each other until
# deadlock_timeout aborts one (a run ~1 s slower, one batch fewer done: docs/benchmarks.md).
#
# Usage: scripts/floor-one-trip.sh [N=200000] [C=4] [B=100] [R=3]
# Env:   DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres); a scratch database
#        named docket_floor_one_trip is dropped and re-created on that server.
# Prints one JSON line per run, then a summary line with the median of each and their ratio.
set -euo pipefail
N=${1:-200000} C=${2:-4} B=${3:-100} R=${4:-3}
# Each goes into SQL text or pgbench's arguments: whole numbers in range, or nothing runs.
[[ $N =~ ^[1-9][0-9]{0,7}$ ]] || { echo "floor-one-trip.sh: N must be 1..99999999, not '$N'" >&2; exit 2; }
[[ $C =~ ^[1-9][0-9]?$ ]] || { echo "floor-one-trip.sh: C must be 1..99, not '$C'" >&2; exit 2; }
[[ $B =~ ^[1-9][0-9]{0,4}$ ]] || { echo "floor-one-trip.sh: B must be 1..99999, not '$B'" >&2; exit 2; }
[[ $R =~ ^[1-9][0-9]?$ ]] || { echo "floor-one-trip.sh: R must be 1..99, not '$R'" >&2; exit 2; }
for t in psql pgbench python3; do
  command -v "$t" >/dev/null || { echo "floor-one-trip.sh: $t not found" >&2; exit 2; }
done
URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
db=docket_floor_one_trip
FURL="${URL%/*}/$db"
work=$(mktemp -d)
trap 'rm -rf "$work"; psql "$URL" -qAtX -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT

# The floor's table and loop, as sql-floor.sh has them.
load() {
  psql "$URL" -qAtX -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  psql "$FURL" -qAtX >/dev/null <<SQL
CREATE TABLE jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue text NOT NULL DEFAULT 'default',
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'queued',
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0,
  locked_until timestamptz
);
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE status = 'queued';
INSERT INTO jobs (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g;
VACUUM ANALYZE jobs;
SQL
}
cat > "$work/two.sql" <<SQL
WITH next AS (SELECT id FROM jobs WHERE queue = 'default' AND status = 'queued' AND run_at <= now() ORDER BY run_at LIMIT $B FOR UPDATE SKIP LOCKED),
claimed AS (UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, locked_until = now() + interval '5 minutes' FROM next WHERE j.id = next.id RETURNING j.id, j.attempts)
SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(attempts), '{}')::text AS atts FROM claimed \gset
UPDATE jobs j SET status = 'done', locked_until = NULL FROM unnest(CAST(':ids' AS bigint[]), CAST(':atts' AS int[])) AS c(id, att) WHERE j.id = c.id AND j.status = 'running' AND j.attempts = c.att;
SQL
# One statement: the previous loop's batch completed (its ids and attempts carried in pgbench
# variables, empty on a client's first loop), the next batch claimed. The two parts touch
# different rows (running ones, queued ones), so sharing one snapshot changes nothing. Each
# client claims in its first $per rounds only (the two-commit loop's count: together exactly N
# jobs) and completes its last batch in one more.
per=$(( (N + B * C - 1) / (B * C) ))
cat > "$work/one.sql" <<SQL
\\set r :r + 1
WITH done AS (UPDATE jobs j SET status = 'done', locked_until = NULL FROM unnest(CAST(':ids' AS bigint[]), CAST(':atts' AS int[])) AS c(id, att) WHERE j.id = c.id AND j.status = 'running' AND j.attempts = c.att RETURNING 1),
next AS (SELECT id FROM jobs WHERE queue = 'default' AND status = 'queued' AND run_at <= now() ORDER BY run_at LIMIT CASE WHEN :r > $per THEN 0 ELSE $B END FOR UPDATE SKIP LOCKED),
claimed AS (UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, locked_until = now() + interval '5 minutes' FROM next WHERE j.id = next.id RETURNING j.id, j.attempts)
SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(attempts), '{}')::text AS atts, (SELECT count(*) FROM done) AS completed FROM claimed \gset
SQL

# One drain; prints "jobs/s done max_attempts". The one-trip loop runs one more round per
# client (its last batch is completed by that round; the claim in it finds nothing).
run() {
  local script=$1 rounds=$per
  [ "$script" = one ] && rounds=$((per + 1))
  load
  local start end
  start=$(date +%s.%N)
  pgbench -n -D 'ids={}' -D 'atts={}' -D r=0 -c "$C" -j "$C" -t "$rounds" -f "$work/$script.sql" "$FURL" \
    >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log" >&2; exit 1; }
  end=$(date +%s.%N)
  read -r done maxatt running < <(psql "$FURL" -qAtX -F' ' -c "SELECT count(*) FILTER (WHERE status='done'), coalesce(max(attempts),0), count(*) FILTER (WHERE status='running') FROM jobs")
  python3 -c "import sys; s=float(sys.argv[2])-float(sys.argv[1]); print(round(int(sys.argv[3])/s), sys.argv[3], sys.argv[4], sys.argv[5])" \
    "$start" "$end" "$done" "$maxatt" "$running"
}

two=() one=()
for _ in $(seq "$R"); do
  for s in two one; do
    read -r rate done maxatt running < <(run $s)
    # As sql-floor.sh, the rate counts the jobs done (a claim that found the last rows locked
    # by another client's claim came back short, leaving a few queued); every claimed batch
    # must have been completed, each job once.
    if [ "$running" != 0 ] || [ "$maxatt" != 1 ]; then
      echo "floor-one-trip.sh: the $s loop left $running jobs running (max attempt $maxatt)" >&2
      exit 1
    fi
    echo "{\"floor\":\"sql-$s\",\"n\":$N,\"clients\":$C,\"batch\":$B,\"done\":$done,\"jobs_per_s\":$rate}"
    if [ $s = two ]; then two+=("$rate"); else one+=("$rate"); fi
  done
done
python3 - "${two[*]}" "${one[*]}" <<'PY'
import json, statistics, sys
two = [float(x) for x in sys.argv[1].split()]
one = [float(x) for x in sys.argv[2].split()]
m2, m1 = statistics.median(two), statistics.median(one)
print(json.dumps({"summary": "one-trip over two-commit", "two_commit_jobs_per_s": round(m2),
                  "one_trip_jobs_per_s": round(m1), "ratio": round(m1 / m2, 3)}))
PY
