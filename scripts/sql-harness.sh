#!/usr/bin/env bash
# sql-harness.sh — Docket's own claim and completion statements under pgbench, shaped like
# ../shared/bench/sql-floor.sh (C clients, claims of B, one fenced completion per claim), so the
# server's cost of Docket's schema can be told apart from the worker's: the floor and this
# harness differ only in the SQL, a Docket drain and this harness only in the client.
#
# With a VARIANT file (SQL run once on the variant's database after migrating, e.g. an index
# dropped or replaced), the base and the variant are drained alternately RUNS times each, so
# the machine's drift (large here) falls on both alike.
#
# Usage: scripts/sql-harness.sh [N=200000] [VARIANT.sql] [RUNS=3]
# Env:   KEEP=1 completes through complete_fenced() (keep_succeeded(true)); by default through
#        complete_delete_fenced(), the worker's default.
#        DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): scratch databases
#        docket_harness_base and docket_harness_variant are re-created on that server and
#        dropped at the end. DOCKET (default target/release/docket) migrates them.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000} VARIANT=${2:-} RUNS=${3:-3} C=4 B=100
# N goes into the loading statement and RUNS into a loop: whole numbers in range, or nothing runs.
[[ $N =~ ^[1-9][0-9]{0,7}$ ]] || { echo "sql-harness.sh: N must be 1..99999999, not '$N'" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]?$ ]] || { echo "sql-harness.sh: RUNS must be 1..99, not '$RUNS'" >&2; exit 2; }
[ -z "$VARIANT" ] || [ -f "$VARIANT" ] || { echo "sql-harness.sh: no variant file '$VARIANT'" >&2; exit 2; }
URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DOCKET=${DOCKET:-target/release/docket}
COMPLETE=complete_delete_fenced
[ "${KEEP:-}" = 1 ] && COMPLETE=complete_fenced
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
[ -x "$DOCKET" ] || { echo "sql-harness.sh: $DOCKET not found (cargo build --release -p docket-queue-cli)" >&2; exit 2; }
base=${URL%/*}
work=$(mktemp -d)
dbs=(docket_harness_base)
[ -n "$VARIANT" ] && dbs+=(docket_harness_variant)
cleanup() {
  rm -rf "$work"
  for d in "${dbs[@]}"; do psql "$URL" -qAtX -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
for d in "${dbs[@]}"; do
  psql "$URL" -qAtX -c "DROP DATABASE IF EXISTS $d" -c "CREATE DATABASE $d" >/dev/null
  "$DOCKET" --database-url "$base/$d" migrate >/dev/null
done
[ -n "$VARIANT" ] && psql "$base/docket_harness_variant" -qAtX -v ON_ERROR_STOP=1 -f "$VARIANT" >/dev/null

# The statements of crates/docket-postgres/sql/claim.sql and complete_many.sql (the fenced
# function complete_fenced(), migration 0016), with the worker's defaults (lease 30 s,
# starvation bound 60 s).
cat >"$work/loop.sql" <<SQL
SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(attempt), '{}')::text AS atts FROM docket.claim('bench', $B, 'harness', 30000, 60000, true) \gset
SELECT count(*) FROM docket.$COMPLETE(CAST(':ids' AS bigint[]), CAST(':atts' AS int[]), 'harness');
SQL
per=$(( (N + B * C - 1) / (B * C) ))

drain() { # drain DB: prints jobs/s
  local u="$base/$1"
  psql "$u" -qAtX -c "TRUNCATE docket.jobs" \
    -c "INSERT INTO docket.jobs (queue, kind, args) SELECT 'bench', 'noop', jsonb_build_object('n', g) FROM generate_series(1, $N) g" \
    -c "VACUUM ANALYZE docket.jobs" >/dev/null
  local s e done
  s=$(date +%s.%N)
  pgbench -n -c "$C" -j "$C" -t "$per" -f "$work/loop.sql" "$u" >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log" >&2; exit 1; }
  e=$(date +%s.%N)
  if [ "$COMPLETE" = complete_delete_fenced ]; then
    # Each completion deleted its job: none may be left.
    done=$(( N - $(psql "$u" -qAtX -c "SELECT count(*) FROM docket.jobs") ))
  else
    # Kept successes live in jobs_succeeded since migration 0035; jobs_all shows both.
    done=$(psql "$u" -qAtX -c "SELECT count(*) FROM docket.jobs_all WHERE state = 'succeeded'")
  fi
  [ "$done" = "$N" ] || { echo "sql-harness.sh: $1 drained $done of $N" >&2; exit 1; }
  python3 -c "print(round($done / ($e - $s)))"
}

for r in $(seq 1 "$RUNS"); do
  for d in "${dbs[@]}"; do
    echo "{\"harness\":\"${d#docket_harness_}\",\"run\":$r,\"n\":$N,\"clients\":$C,\"batch\":$B,\"jobs_per_s\":$(drain "$d")}"
  done
done
