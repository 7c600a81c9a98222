# jobs.sh — sourced by the scripts that run their cases side by side (mutants.sh,
# model-check.sh, fuzz.sh): each starts a case with `&`, calls `throttle MAX` after it, and
# `wait`s at the end; a case writes its table row to a file of its own, printed in order.

# throttle MAX: returns once fewer than MAX of this shell's background jobs are running.
# (A case's exit status is its own business, written to its row: `wait -n` failing must not
# end a caller running under `set -e`.)
throttle() {
  while [ "$(jobs -rp | wc -l)" -ge "$1" ]; do wait -n || true; done
}
