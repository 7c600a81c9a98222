#!/usr/bin/env bash
# mutants.sh — proves that the tests behind Docket's guarantees can fail.
#
# Each mutant (crates/docket-core/src/mutants.rs) removes one guarantee: a fence from a SQL
# function, SKIP LOCKED from the claim, a check from the runtime. For each one this script
# runs the tests that claim to prove that guarantee with DOCKET_MUTANT set (the test binaries
# are built once with the test-only cargo feature `fault-injection`; the variable selects the
# mutant at run time), and prints a table. A mutant that no test catches is a proof that
# cannot fail: the script then exits 1.
#
# First the same tests run without a mutant and must pass, or "caught" would mean nothing.
# A mutant is caught at its first failing spec, so each list below starts with its cheapest
# catching test.
#
# Usage: scripts/mutants.sh [MUTANT ...]    (default: every mutant)
# Env:   DATABASE_URL as for the test suite. MUTANTS_JOBS: mutants run at once (default: twice
#        the number of cores). MUTANTS_BASELINE=suite skips the baseline run, for a caller that
#        runs the whole suite (same test binaries, a superset of the catching tests) as
#        well and fails when it fails, as .ci/run does.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/jobs.sh
source scripts/lib/jobs.sh

# mutant | tests that must catch it (package:test-target[:name filter], space-separated)
MAP=$(cat <<'EOF'
complete_no_attempt_check|docket-postgres:history:a_stale_completion_moves_nothing docket-postgres:conformance:a_wrong_owner_cannot_write docket-postgres:conformance docket-postgres:interleavings
complete_no_fence|docket-cli:cli_all:crash::without_worker_guards docket-postgres:conformance:store_matches_the_state_machine_model docket-postgres:interleavings
complete_after_expiry|docket-postgres:lifecycle:an_expired_lease_cannot_complete docket-postgres:conformance
complete_delete_no_fence|docket-postgres:conformance:completing_by_delete docket-postgres:conformance
fail_no_fence|docket-postgres:conformance:a_wrong_owner_cannot_write docket-postgres:conformance docket-postgres:interleavings
snooze_no_fence|docket-postgres:conformance:a_wrong_owner_cannot_write docket-postgres:conformance docket-postgres:interleavings
heartbeat_no_fence|docket-postgres:conformance:a_wrong_owner_cannot_write docket-postgres:conformance docket-postgres:interleavings
claim_no_skip_locked|docket-postgres:concurrency:a_claim_skips_a_locked_row
reap_unexpired|docket-postgres:reaper docket-postgres:conformance:store_matches_the_state_machine_model docket-postgres:conformance
no_cancel_on_lost_lease|docket-worker:worker:runtime::a_lost_lease_cancels_the_handler
no_lease_watchdog|docket-worker:worker:boundaries::heartbeats_cut_by_a_partition_never_overlap_the_successor docket-cli:cli_all:partition::postgres_worker_partitioned_past_its_lease
notify_trusted|docket-worker:worker:trust::a_forged_cancel_notification
buffered_starts_after_lost|docket-worker:worker:prefetch::a_buffered_job_never_starts_once_its_lease_is_lost
controlled_work_buffered|docket-worker:worker:prefetch::keyed_work_is_claimed_only_for_free_slots
release_counts_run|docket-worker:worker:prefetch::the_attempt_a_handler_sees_counts_runs
claim_waits_on_public_lock|docket-worker:worker:trust::locks_any_connection_can_hold_stop_no_claim_and_no_completion
claim_walk_stops_at_held_keys|docket-postgres:conformance:a_deep_backlog_of_a_held_key_holds_back_no_one
grant_keeps_job_writes|docket-cli:cli_all:roles::every_command_as_each_role
handover_lost|docket-postgres:concurrency:a_release_that_meets_a_claim_holding_the_key docket-worker:worker:scheduling::a_release_that_meets_a_held_key_lock
bucket_never_spent|docket-worker:worker:scheduling::a_queue_rate_limit_holds_across_four_workers
claim_clock_before_lock|docket-mysql:conformance:a_claim_that_waited_for_the_limit_lock
no_idle_transaction_bound|docket-mysql:server_modes:a_connection_idle_inside_a_transaction
pg_no_idle_transaction_bound|docket-postgres:reaper:a_leader_cut_off_inside_a_cron_transaction
local_retry_past_budget|docket-sqlite:conformance:retry_backs_off_then_dies_when_attempts_run_out docket-sqlite:conformance
held_back_not_hinted|docket-worker:worker:sqlite::a_freed_key_wakes_the_worker_holding_its_next_job_before_any_poll
output_stale_completion|docket-postgres:conformance:a_batch_records_only_held_leases docket-postgres:conformance
step_no_fence|docket-postgres:conformance:steps_are_recorded_once_under_the_claim docket-postgres:conformance:a_batch_of_steps_is_fenced_step_by_step docket-postgres:conformance:store_matches_the_state_machine_model docket-postgres:conformance
signal_answer_not_kept|docket-worker:worker:durable::postgres::a_timed_out_wait_keeps_its_answer docket-worker:worker:durable::
signal_wakes_any|docket-postgres:conformance:signals_wake_parked_jobs_once docket-postgres:conformance:store_matches_the_state_machine_model docket-postgres:conformance
park_no_fence|docket-postgres:conformance:store_matches_the_state_machine_model docket-postgres:conformance
pooler_not_detected|docket-cli:cli_all:pooler::an_unrecognised_transaction_pooler_is_detected_and_nothing_fails
bulk_unconfirmed|docket-dashboard:http:a_bulk_action_walks_everything_a_filter_matches_in_batches
progress_stale_attempt|docket-postgres:conformance:progress_is_written_only_under_the_claim docket-postgres:conformance
gauges_keep_vanished|docket-dashboard:gauges:a_vanished_queue_has_no_series
depth_counts_every_job|docket-sqlite:conformance:queue_health_and_depth_history docket-mysql:conformance:queue_health_and_depth_history
claim_hint_strict|docket-postgres:scan_hint:under_a_held_snapshot
claim_hint_ignored|docket-postgres:scan_hint:under_a_held_snapshot
claim_probe_blind|docket-postgres:scan_hint:under_a_held_snapshot
outbox_mark_walks|docket-postgres:outbox:a_mark_probes_the_primary_key
workflow_stale_unblocks|docket-postgres:conformance:a_stale_parent_unblocks_nothing docket-sqlite:conformance:a_stale_parent_unblocks_nothing
workflow_double_decrement|docket-postgres:conformance:an_edge_is_consumed_once docket-sqlite:conformance:an_edge_is_consumed_once
workflow_cancel_not_applied|docket-postgres:conformance:failure_policies_apply_on_every_end docket-sqlite:conformance:failure_policies_apply_on_every_end
workflow_stale_spawns|docket-postgres:conformance:a_running_node_spawns_once_under_its_claim docket-sqlite:conformance:a_running_node_spawns_once_under_its_claim
batch_callback_twice|docket-postgres:conformance:a_batch_callback_fires_once_per_occasion docket-sqlite:conformance:a_batch_callback_fires_once_per_occasion
outbox_mark_no_fence|docket-postgres:conformance:a_stale_relay_marks_nothing docket-sqlite:conformance:a_stale_relay_marks_nothing
outbox_no_msg_id|docket-nats:relay:postgres::a_republish_after_a_crash_before_the_mark_is_dropped docket-nats:relay:sqlite::a_republish_after_a_crash_before_the_mark_is_dropped
outbox_key_pipelined|docket-postgres:conformance:a_keys_messages_are_claimed_one_at_a_time_in_order docket-sqlite:conformance:a_keys_messages_are_claimed_one_at_a_time_in_order
source_writes_when_lost|docket-nats:source_faults:a_worker_past_its_delivery_writes_nothing docket-cli:cli_all:consume_crash::a_paused_consumer_cannot_overwrite_its_successor
source_no_beat|docket-nats:source_faults:a_long_job_is_held_by_in_progress_acks
source_no_dead_letter|docket-nats:source_faults:a_last_run_without_an_outcome_is_dead_lettered docket-nats:source:every_outcome_is_written_as_jetstream_expects
EOF
)

want=("$@")
selected() { [ ${#want[@]} -eq 0 ] && return 0; local m; for m in "${want[@]}"; do [ "$m" = "$1" ] && return 0; done; return 1; }

out=$(mktemp -d); trap 'rm -rf "$out"' EXIT

# run SPEC LOGFILE: runs one test spec; prints the names of failed tests (or TIMEOUT).
# The test binary is run directly (from its package's directory, as cargo does): `cargo test
# -p PKG` would resolve features for that package alone and rebuild the workspace's crates
# in another configuration, which was most of this script's 17 minutes.
run() {
  local spec=$1 log=$2 pkg target filter exe dir
  IFS=: read -r pkg target filter <<<"$spec"
  read -r exe dir < <(awk -v p="$pkg" -v t="$target" '$1 == p && $2 == t { print $3, $4 }' "$out/bins")
  (cd "$dir" && timeout 600 "$exe" -q ${filter:+"$filter"}) >"$log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && { echo "TIMEOUT"; return 1; }
  grep -E '^    [a-z0-9_:]+$' "$log" | sed 's/^ *//' | sort -u | sed "s/^/$target::/"
  return $rc
}

specs=$(echo "$MAP" | while IFS='|' read -r m tests; do selected "$m" && echo "$tests"; done | tr ' ' '\n' | sort -u)
echo "building the test binaries (feature fault-injection via the dev-dependencies)..." >&2
# One line per test binary: package, target, executable, package directory.
cargo test -q --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        pkg = m["manifest_path"]
        print(os.path.basename(os.path.dirname(pkg)), m["target"]["name"], m["executable"], os.path.dirname(pkg))
' >"$out/bins"
[ "${PIPESTATUS[0]}" = 0 ] && [ -s "$out/bins" ] || { echo "mutants.sh: the tests do not build" >&2; exit 2; }

# A spec naming no binary must stop the script, not count as a catch.
for spec in $specs; do
  IFS=: read -r pkg target _ <<<"$spec"
  awk -v p="$pkg" -v t="$target" '$1 == p && $2 == t { found = 1 } END { exit !found }' "$out/bins" \
    || { echo "mutants.sh: no test binary for $spec" >&2; exit 2; }
done

if [ "${MUTANTS_BASELINE:-}" = suite ]; then
  echo "baseline: the workspace's test run (MUTANTS_BASELINE=suite), not repeated here" >&2
  specs=""
else
  echo "baseline: the catching tests pass without a mutant" >&2
fi
for spec in $specs; do
  if ! DOCKET_MUTANT= run "$spec" "$out/baseline.log" >/dev/null; then
    # The assertion first (a backtrace's tail alone does not say what failed), then the tail.
    echo "mutants.sh: $spec fails without a mutant:" >&2
    grep -E -A3 "panicked at" "$out/baseline.log" | head -40 >&2
    tail -30 "$out/baseline.log" >&2; exit 2
  fi
done

# The mutants run MUTANTS_JOBS at a time (default: two per core): each test makes its own
# database, schema or server, and the catching tests wait on the database and on timers far
# more than they compute — all 34 mutants took 111 s one at a time, 68 s two at a time and
# 35 s four at a time, with 8 to 16 s of CPU (2026-12-06, the 2-core VM of docs/benchmarks.md).
# A loaded machine can only make a catching test fail more often, never let a mutant pass it.
# The table is printed in the list's order once all are done.
jobs_max=${MUTANTS_JOBS:-$(($(nproc) * 2))}
i=0
while IFS='|' read -r m tests; do
  selected "$m" || continue
  i=$((i + 1)); slot=$(printf '%03d' "$i")
  (
    caught=no; by=()
    for spec in $tests; do
      names=$(DOCKET_MUTANT=$m run "$spec" "$out/$m.log")
      rc=$?
      if [ $rc -ne 0 ]; then
        caught=yes
        [ -n "$names" ] && by+=($names) || by+=("$spec (exit $rc)")
        break
      fi
    done
    [ $caught = no ] && touch "$out/survived.$slot"
    printf '%-28s | %-7s | %s\n' "$m" "$caught" "${by[*]:-none}" >"$out/row.$slot"
  ) &
  throttle "$jobs_max"
done <<<"$MAP"
wait
printf '%-28s | %-7s | %s\n' "mutant" "caught" "failing tests"
printf '%-28s-|-%-7s-|-%s\n' "----------------------------" "-------" "-------------"
[ "$i" -gt 0 ] && cat "$out"/row.*
survivors=$(find "$out" -name 'survived.*' | wc -l)
if [ $survivors -gt 0 ]; then
  echo "mutants.sh: $survivors mutant(s) survived: their guarantee has no test that can fail" >&2
  exit 1
fi
echo "mutants.sh: every mutant was caught" >&2
