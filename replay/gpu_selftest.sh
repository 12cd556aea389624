#!/usr/bin/env bash
# Validates a machine with NVIDIA GPUs in one command: calibrates it (CPU and GPU microbenchmarks), predicts a
# set of plans that fits the GPUs present with the calibrated profile, replays each with the CUDA backend, and
# compares predicted with measured, per plan and per op kind. With one GPU: 1F1B, ZB-H1, RoundPipe, SPipe and
# Mobius on that GPU; with more: the same schedules as pipelines over up to 4 of them. Takes a few minutes.
#
# Usage: replay/gpu_selftest.sh [--out DIR] [--model NAME] [--seq N] [path/to/pipesim]
#   (build first: ./run.sh, or cmake with nvcc on the PATH)
# Writes DIR (default gpu-selftest) with:
#   report.json   format pipesim-gpu-selftest: the machine, the calibration's wall time, and per plan the
#                 predicted and measured step and `pipesim compare --format json` (per op kind: predicted,
#                 measured, error)
#   report.txt    the same as tables
#   profile.json  the calibrated hardware profile (with its .cpu-raw.json and .cuda-raw.json measurements), its
#                 gpu.attention_kernels measured by calibrate/pytorch/attention_rates.py where python3 has PyTorch
#   attention.json those attention rates
#   <schedule>.plan.json, .predicted.json, .measured.json
set -euo pipefail
OUT_DIR=gpu-selftest
MODEL=qwen3-1.7b
SEQ=1024
PIPESIM=build/cli/pipesim
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_DIR=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) PIPESIM=$1; shift ;;
  esac
done
command -v nvidia-smi >/dev/null || { echo "gpu_selftest: no nvidia-smi: no NVIDIA driver here" >&2; exit 1; }
GPUS=$(nvidia-smi -L | grep -c '^GPU' || true)
[ "$GPUS" -ge 1 ] || { echo "gpu_selftest: no GPU visible" >&2; exit 1; }
PP=$(( GPUS >= 4 ? 4 : GPUS ))
mkdir -p "$OUT_DIR"
REPORT_TXT="$OUT_DIR/report.txt"
: > "$REPORT_TXT"
say() { echo "$@" | tee -a "$REPORT_TXT"; }

GPU_NAME=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
say "== gpu_selftest: $GPUS GPU(s) visible ($GPU_NAME); plans use pp $PP; $MODEL, seq $SEQ"
say "== calibrating (unmeasured figures from the shipped profile of this GPU)"
start_ns=$(date +%s%N)
"$PIPESIM" calibrate --out "$OUT_DIR/profile.json" 2>&1 | tee "$OUT_DIR/calibrate.log"
calibrate_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
calibrate_s=$(printf '%d.%03d' $(( calibrate_ms / 1000 )) $(( calibrate_ms % 1000 )))
say "== calibration took ${calibrate_s} s"
attention="not measured: python3 has no PyTorch with CUDA"
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  say "== measuring the fused attention kernels through PyTorch"
  if python3 "$(dirname "$0")/../calibrate/pytorch/attention_rates.py" --out "$OUT_DIR/attention.json" \
      --profile "$OUT_DIR/profile.json" --profile-out "$OUT_DIR/profile.json" 2>&1 | tee -a "$REPORT_TXT"; then
    attention="attention.json"
  else
    attention="failed: see report.txt"
  fi
fi
say "== attention kernels: $attention"

plans_json=""
for schedule in 1f1b zb-h1 roundpipe spipe mobius; do
  say "== $schedule"
  base="$OUT_DIR/$schedule"
  # The CUDA replay runs the attention core as GEMMs: the prediction prices it so (--attention-kernel gemm).
  if ! "$PIPESIM" simulate --model "$MODEL" --hw "$OUT_DIR/profile.json" --nodes 1 --pp "$PP" --seq "$SEQ" \
      --microbatches $(( 2 * PP )) --schedule "$schedule" --attention-kernel gemm --plan-out "$base.plan.json" \
      --timeline "$base.predicted.json" >"$base.simulate.txt" 2>&1; then
    say "$schedule: not predicted: $(tail -1 "$base.simulate.txt")"
    continue
  fi
  if ! "$PIPESIM" replay "$base.plan.json" --backend cuda --out "$base.measured.json" >"$base.replay.txt" 2>&1; then
    say "$schedule: not replayed: $(tail -1 "$base.replay.txt")"
    continue
  fi
  "$PIPESIM" compare "$base.predicted.json" "$base.measured.json" --top 5 | tee -a "$REPORT_TXT"
  comparison=$("$PIPESIM" compare "$base.predicted.json" "$base.measured.json" --top 5 --format json)
  plans_json="${plans_json:+$plans_json,}{\"schedule\": \"$schedule\", \"comparison\": $comparison}"
done

cat > "$OUT_DIR/report.json.tmp" <<EOF
{"format": "pipesim-gpu-selftest", "version": 1,
 "machine": {"gpus": $GPUS, "gpu": "$GPU_NAME", "host": "$(hostname)"},
 "model": "$MODEL", "seq": $SEQ, "pp": $PP,
 "calibration": {"profile": "profile.json", "seconds": $calibrate_s, "attention_kernels": "$attention"},
 "plans": [$plans_json]}
EOF
mv "$OUT_DIR/report.json.tmp" "$OUT_DIR/report.json"
say "== wrote $OUT_DIR/report.json and $REPORT_TXT"
