#!/usr/bin/env bash
# workflow-cost.sh — where a workflow node's server time goes, without a client in the way.
#
# In a scratch schema (migrated by the release `docket` binary), drains 10,000 plain jobs and
# then 1,000 chains of 10 nodes with one DO block each — claim 100, complete them, commit,
# again — calling Docket's own SQL functions: complete_delete_fenced() (the default for
# plain jobs), complete_fenced() (plain jobs kept), complete_nodes_fenced() (nodes). Prints
# each drain's wall time (the server's time: nothing leaves it) and the plpgsql functions'
# total times (track_functions = 'pl', set for this run's connections). Run each variant a few
# times: the first of a cold cluster is slower.
#
# Usage: DATABASE_URL=postgres://… scripts/workflow-cost.sh   (a server whose superuser may
#        SET track_functions; the shared one or `docket bench`'s embedded cluster). The
#        scratch schema docket_wfcost is dropped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
bin=${DOCKET_BIN:-target/release/docket}
[ -x "$bin" ] || bin="${CARGO_TARGET_DIR:-target}/release/docket"
schema=docket_wfcost
"$bin" --schema "$schema" migrate >/dev/null
export PGOPTIONS="-c track_functions=pl -c client_min_messages=warning"
psql() { command psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -q "$@"; }
drain() { # $1 completion call
  psql -c "DO \$\$ DECLARE ids bigint[]; atts int[]; BEGIN LOOP
    SELECT array_agg(id), array_agg(attempt) INTO ids, atts
      FROM $schema.claim('bench', 100, 'x', 600000, 600000, true, NULL);
    EXIT WHEN ids IS NULL;
    PERFORM $schema.$1;
    COMMIT;
  END LOOP; END \$\$"
}
run() { # $1 label, $2 plain|chain, $3 completion call
  psql -c "TRUNCATE $schema.jobs, $schema.job_deps, $schema.workflows"
  if [ "$2" = plain ]; then
    psql -c "INSERT INTO $schema.jobs (queue, kind, args) SELECT 'bench', 'noop', '{}' FROM generate_series(1, 10000)"
  else
    psql -c "DO \$\$ BEGIN FOR c IN 1..1000 LOOP PERFORM $schema.enqueue_workflow(jsonb_build_object(
      'name', 'chain', 'nodes', (SELECT jsonb_agg(jsonb_build_object('name', 'n' || i, 'queue', 'bench',
        'kind', 'noop', 'after', CASE WHEN i = 0 THEN '[]'::jsonb ELSE jsonb_build_array('n' || (i - 1)) END))
      FROM generate_series(0, 9) AS i))); END LOOP; END \$\$"
  fi
  psql -c "VACUUM ANALYZE $schema.jobs" -c "VACUUM ANALYZE $schema.job_deps"
  psql -c "SELECT pg_stat_reset()" >/dev/null
  local s e
  s=$(date +%s%N)
  drain "$3"
  e=$(date +%s%N)
  printf '%-34s wall %6.1f ms' "$1" "$(echo "($e - $s) / 1000000" | bc -l)"
  psql -Atc "SELECT string_agg(format(' | %s %s calls %s ms', funcname, calls, round(total_time::numeric, 1)), '' ORDER BY total_time DESC)
             FROM pg_stat_user_functions WHERE schemaname = '$schema' AND calls > 0"
}
for _ in 1 2; do
  run "plain, deleted (the default)" plain "complete_delete_fenced(ids, atts, 'x')"
  run "plain, kept" plain "complete_fenced(ids, atts, 'x')"
  run "chains of 10 (nodes)" chain "complete_nodes_fenced(ids, atts, array_fill(NULL::jsonb, ARRAY[cardinality(ids)]), 'x')"
done
psql -c "DROP SCHEMA $schema CASCADE"
