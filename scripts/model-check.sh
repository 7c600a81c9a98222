#!/usr/bin/env bash
# model-check.sh — model-checks Docket's lease protocol (models/*.pml) with spin.
#
# For each model and configuration: the faithful version must verify with no error, and
# each deliberately broken variant must yield a counterexample that names the property it
# breaks (models/lease.pml lists them). Prints a table (model, variant, expected, result)
# and exits 1 on any surprise: a faithful model with an error, a broken one that verifies,
# or one that fails another property than the one expected. Exhaustive search (no bitstate
# hashing), so "verified" covers every interleaving within the model's bounds.
#
# Usage: scripts/model-check.sh            Needs spin (Debian package `spin`) and a C compiler.
# Env:   MODEL_FULL=1 adds the searches that take minutes (MariaDB's claim with two reapers).
#        MODEL_JOBS: cases checked at once (default: the number of cores).
#        MODEL_TRAILS=DIR keeps each counterexample's trail, replayed (spin -t -p), in DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/jobs.sh
source scripts/lib/jobs.sh
command -v spin >/dev/null || { echo "model-check.sh: spin not found (apt-get install spin)" >&2; exit 2; }
cc=${CC:-cc}

# model | configuration (-D flags, comma-separated; - for none) | expected [| full: only with
# MODEL_FULL=1, for a search that takes minutes]
CASES=$(cat <<'EOF2'
lease|-|verified
lease|BROKEN_NO_TOKEN|stale_token_wrote
lease|BROKEN_REAP_LIVE|two_leases_held
lease|BROKEN_HB_REVIVE|write_outside_lease
lease|BROKEN_LATE_COMPLETE|write_outside_lease
lease|BROKEN_STEP_NO_FENCE|stale_token_wrote
lease|BROKEN_RELEASE_NO_FENCE|stale_token_wrote
lease|PARKS|verified
lease|PARKS,BROKEN_PARK_NO_FENCE|stale_token_wrote
lease|PARKS,BROKEN_PARK_BLIND|lost_wakeup
lease|PARKS,BROKEN_PARK_OLD_SNAPSHOT|lost_wakeup
lease|PARKS,BROKEN_SIGNAL_NO_WAKE|lost_wakeup
lease|TWO_STEP|verified
lease|TWO_STEP,BROKEN_NO_RECHECK|two_leases_held
lease|TWO_STEP,TWO_REAPERS,BROKEN_REAP_UNFENCED|second_terminal_write
lease|TWO_STEP,BROKEN_REAP_LIVE|two_leases_held
lease|TWO_STEP,BROKEN_NO_TOKEN|stale_token_wrote
lease|TWO_STEP,BROKEN_HB_REVIVE|write_outside_lease
lease|TWO_STEP,PARKS|verified
lease|TWO_STEP,PARKS,BROKEN_PARK_OLD_SNAPSHOT|lost_wakeup
lease|TWO_STEP,TWO_REAPERS|verified|full
lease|CHILD|verified
lease|CHILD,BROKEN_UNBLOCK_STALE|early_child
lease|CHILD,BROKEN_DOUBLE_UNBLOCK|edge_twice
lease|TWO_STEP,CHILD|verified|full
EOF2
)

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# one INDEX MODEL CONFIG EXPECTED: builds and checks one case; writes its table row to
# $work/row.INDEX, and $work/surprise.INDEX when the result is not the expected one, or
# $work/broken.INDEX when the model does not build.
one() {
  local i=$1 model=$2 config=$3 expected=$4 dir defs errors states result broke mark
  dir="$work/$model-${config//,/-}"; mkdir -p "$dir"; cp "models/$model.pml" "$dir/"
  defs=(); [ "$config" != - ] && for d in ${config//,/ }; do defs+=("-D$d"); done
  if ! ( cd "$dir" && spin "${defs[@]}" -a "$model.pml" >spin.log 2>&1 \
      && $cc -O2 -w -DSAFETY -o pan pan.c >cc.log 2>&1 ); then
    { echo "model-check.sh: $model ($config) does not build:"; cat "$dir"/*.log; } >"$work/broken.$i"
    return
  fi
  ( cd "$dir" && ./pan -m200000 -E >pan.log 2>&1 )
  errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' "$dir/pan.log")
  states=$(sed -nE 's/^ *([0-9]+) states, stored.*/\1/p' "$dir/pan.log")
  if grep -q "search not completed\|max search depth too small" "$dir/pan.log"; then
    result="incomplete search"
  elif [ "$errors" = 0 ]; then
    result="verified ($states states)"
  else
    broke=$(sed -nE 's/.*assertion violated +!\(([a-z_]+)\).*/\1/p' "$dir/pan.log" | head -1)
    result="${broke:-error}"
    if [ -n "${MODEL_TRAILS:-}" ]; then
      mkdir -p "$MODEL_TRAILS"
      (cd "$dir" && spin "${defs[@]}" -t -p "$model.pml") >"$MODEL_TRAILS/$model-${config//,/-}.trail.txt" 2>&1
    fi
  fi
  case "$result" in
    "$expected"*) mark=ok ;;
    *) mark=SURPRISE; touch "$work/surprise.$i" ;;
  esac
  printf '%-6s | %-34s | %-22s | %s %s\n' "$model" "${config//,/ }" "$expected" "$result" \
    "$([ $mark = ok ] || echo "<- $mark")" >"$work/row.$i"
}
# The cases run MODEL_JOBS at a time (default: one per core); each is one single-threaded
# `pan`, and CI waits for the model check after its build. The table keeps the list's order.
jobs_max=${MODEL_JOBS:-$(nproc)}
i=0
while IFS='|' read -r model config expected only; do
  [ "${only:-}" = full ] && [ -z "${MODEL_FULL:-}" ] && continue
  i=$((i + 1))
  one "$(printf '%03d' "$i")" "$model" "$config" "$expected" &
  throttle "$jobs_max"
done <<<"$CASES"
wait
if compgen -G "$work/broken.*" >/dev/null; then
  cat "$work"/broken.* >&2; exit 2
fi
printf '%-6s | %-34s | %-22s | %s\n' model variant expected result
printf '%-6s-|-%-34s-|-%-22s-|-%s\n' ------ ---------------------------------- ---------------------- ------
cat "$work"/row.*
surprises=$(find "$work" -name 'surprise.*' | wc -l)
if [ $surprises -gt 0 ]; then
  echo "model-check.sh: $surprises surprise(s)" >&2; exit 1
fi
echo; echo "model-check.sh: every faithful model verified, every broken variant caught" >&2
