#!/usr/bin/env bash
# The replay loop end to end on this machine, host backend: profile the host backend (calibrate
# --replay-host), predict a 2-stage plan of the tiny test model with that profile, replay the plan for real,
# compare. Prints the prediction error per schedule (the README's figure).
# Usage: scripts/replay_host_loop.sh [path/to/pipesim]
set -euo pipefail
PIPESIM=${1:-build/cli/pipesim}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PIPESIM" calibrate --replay-host --out "$WORK/host.json" 2>/dev/null
for schedule in gpipe 1f1b; do
  "$PIPESIM" simulate --model "$ROOT/tests/fixtures/tiny_model.json" --hw "$WORK/host.json" --pp 2 \
    --microbatches 8 --seq 256 --schedule "$schedule" --plan-out "$WORK/$schedule.plan.json" \
    --timeline "$WORK/$schedule.predicted.json" >/dev/null
  "$PIPESIM" replay "$WORK/$schedule.plan.json" --iterations 3 --out "$WORK/$schedule.measured.json" | head -2
  "$PIPESIM" compare "$WORK/$schedule.predicted.json" "$WORK/$schedule.measured.json" --top 0 | head -8
  echo
done
