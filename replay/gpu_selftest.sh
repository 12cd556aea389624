#!/usr/bin/env bash
# For a user with NVIDIA GPUs: calibrates this machine, predicts a 1f1b and a roundpipe plan of Qwen3-1.7B on
# it, replays both with the CUDA backend and prints predicted vs measured. Never run during development (no
# GPU was available): please report what it prints.
# Usage: replay/gpu_selftest.sh [path/to/pipesim]   (build first: ./run.sh, or cmake with nvcc on the PATH)
set -euo pipefail
PIPESIM=${1:-build/cli/pipesim}
command -v nvidia-smi >/dev/null || { echo "gpu_selftest: no nvidia-smi: no NVIDIA driver here" >&2; exit 1; }
GPUS=$(nvidia-smi -L | wc -l)
[ "$GPUS" -ge 1 ] || { echo "gpu_selftest: no GPU visible" >&2; exit 1; }
PP=$(( GPUS >= 4 ? 4 : GPUS ))
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "== calibrating ($GPUS GPUs visible; plans use $PP)"
"$PIPESIM" calibrate --quick --out "$WORK/this-machine.json"
for schedule in 1f1b roundpipe; do
  echo "== $schedule"
  "$PIPESIM" simulate --model qwen3-1.7b --hw "$WORK/this-machine.json" --nodes 1 --pp "$PP" --seq 1024 \
    --microbatches $(( 2 * PP )) --schedule "$schedule" --plan-out "$WORK/$schedule.plan.json" \
    --timeline "$WORK/$schedule.predicted.json" >/dev/null
  "$PIPESIM" replay "$WORK/$schedule.plan.json" --backend cuda --out "$WORK/$schedule.measured.json"
  "$PIPESIM" compare "$WORK/$schedule.predicted.json" "$WORK/$schedule.measured.json" --top 5
done
