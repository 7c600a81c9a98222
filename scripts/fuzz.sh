#!/usr/bin/env bash
# Fuzzes Docket's parsers of hostile input with libFuzzer on the stable toolchain: each target
# under fuzz/fuzz_targets for FUZZ_SECONDS (default 60), starting from its seed corpus in
# fuzz/corpus, FUZZ_JOBS targets at a time (default: one per core). Exits 1 when any target
# fails and copies the failing input to
# fuzz/regressions/<target>/ (the suite replays that directory: add a named unit test next
# to the parser, fix, keep the file).
#
# The build passes the coverage instrumentation flags cargo-fuzz passes, without a sanitizer:
# the targets are safe Rust, a sanitizer (which needs RUSTC_BOOTSTRAP=1 on stable) adds only
# build and run time, and no cargo-fuzz install is needed. `cargo fuzz run <target>` works
# too where cargo-fuzz is installed (see docs/guarantees.md).
#
#   FUZZ_SECONDS=600 scripts/fuzz.sh            # every target, ten minutes each
#   FUZZ_SECONDS=30 scripts/fuzz.sh cron        # one target
#   FUZZ_JOBS=1 scripts/fuzz.sh                 # one target after another
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh           # build the targets, run none
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/jobs.sh
source scripts/lib/jobs.sh
secs="${FUZZ_SECONDS:-60}"
host="$(rustc -vV | sed -n 's/^host: //p')"
# A target directory of its own: the instrumented artifacts never replace the main build's.
target_dir="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/../fuzz-target}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(ls fuzz/fuzz_targets | sed 's/\.rs$//'))
fi

# --target keeps RUSTFLAGS off build scripts and proc macros (as cargo-fuzz does).
RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth" \
  cargo build --quiet --release --locked --manifest-path fuzz/Cargo.toml --target "$host" \
  --target-dir "$target_dir" $(printf -- '--bin %s ' "${targets[@]}")

# FUZZ_BUILD_ONLY=1: build the targets and stop (CI builds them beside its main build and
# runs them once that is done, so they do not fuzz on a starved core).
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Targets run side by side, FUZZ_JOBS at a time (default: one per core): each libFuzzer
# process is single-threaded, and CI waits for the slowest batch, not for their sum.
jobs="${FUZZ_JOBS:-$(nproc)}"

# one TARGET: fuzzes it for $secs; writes "executions corpus result" to $work/TARGET.row.
one() {
  local t=$1 log="$work/$1.log" result execs corpus
  mkdir -p "$work/$t" "$work/$t.crash"
  # New inputs go to the scratch directory (first), the seeds are read only.
  if "$target_dir/$host/release/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$work/$t.crash/" \
       "$work/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    mkdir -p "fuzz/regressions/$t"
    for f in "$work/$t.crash"/*; do
      [ -e "$f" ] && cp "$f" "fuzz/regressions/$t/" && result="FAILED: fuzz/regressions/$t/$(basename "$f")"
    done
    grep -m1 -A12 -E "panicked|ERROR: libFuzzer" "$log" >&2 || tail -20 "$log" >&2
  fi
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  corpus="$(ls "$work/$t" | wc -l)"
  echo "${execs:-?} $corpus $result" >"$work/$t.row"
}

for t in "${targets[@]}"; do
  one "$t" &
  throttle "$jobs"
done
wait

printf '%-12s %10s %8s %8s  %s\n' target executions corpus seconds result
status=0
for t in "${targets[@]}"; do
  read -r execs corpus result <"$work/$t.row" || { execs='?' corpus='?' result="FAILED: no result"; }
  case "$result" in ok) ;; *) status=1 ;; esac
  printf '%-12s %10s %8s %8s  %s\n' "$t" "$execs" "$corpus" "$secs" "$result"
done
exit $status
