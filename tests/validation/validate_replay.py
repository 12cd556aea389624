#!/usr/bin/env python3
"""Predicts the plans `replay/gpu_selftest.sh` replayed on one GPU (Qwen3-1.7B, sequence 1024, two microbatches,
pp 1: 1F1B, ZB-H1, RoundPipe, SPipe and Mobius) with the profile calibrated on that machine in the same run, and
compares each prediction with the measured timeline (`pipesim compare`): step time and the time of every op kind.

Usage: validate_replay.py PIPESIM [--check] [--gpu h100|h200]
Sources, each a `replay/gpu_selftest.sh` run (DIR/report.json; calibrated_GPU.json is the calibration of that run,
its raw GPU measurements beside it; the measured timelines hold every op's start and end from CUPTI records):
  h100_replay/  one NVIDIA H100 80GB HBM3 (SXM, driver 580.159.04, CUDA 13.0), 16 Xeon cores, 2026-11-27
  h200_replay/  one NVIDIA H200 (143,771 MiB, driver 580.159.04, CUDA 13.0), 16 Xeon cores, 2026-11-27

With --check it exits 1 when a plan's step time leaves STEP_BOUND_PCT, a machine's mean absolute step error leaves
MEAN_BOUND_PCT, or an op kind of the GPU-only schedules (1F1B, ZB-H1) leaves KIND_BOUND_PCT. They guard what the
model gives today (H100: +0.0, +0.2, +5.3, +17.4, +7.8 %; H200: +4.5, +3.8, +4.6, +7.3, +0.5 %; the offload
schedules' CPU optimizer runs slower during the step than calibrated alone, see docs/calibration-and-replay.md).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GPUS = ("h100", "h200")
SCHEDULES = ["1f1b", "zb-h1", "roundpipe", "spipe", "mobius"]
STEP_BOUND_PCT = 25.0
MEAN_BOUND_PCT = 12.0
KIND_BOUND_PCT = 10.0


def compare(pipesim, gpu, schedule, tmp):
    runs = os.path.join(HERE, f"{gpu}_replay")
    predicted = os.path.join(tmp, f"{gpu}-{schedule}.predicted.json")
    args = [pipesim, "simulate", "--model", "qwen3-1.7b", "--hw", os.path.join(runs, f"calibrated_{gpu}.json"),
            "--nodes", "1", "--pp", "1", "--seq", "1024", "--microbatches", "2", "--schedule", schedule,
            "--attention-kernel", "gemm", "--timeline", predicted]  # the CUDA replay runs attention as GEMMs
    subprocess.run(args, check=True, capture_output=True, text=True)
    out = subprocess.run([pipesim, "compare", predicted, os.path.join(runs, f"{schedule}.measured.json"),
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def validate(pipesim, gpu, tmp):
    """Prints one machine's plans; returns what leaves the bounds."""
    failures, errors = [], []
    print(f"{gpu}: {'schedule':<10} {'predicted s':>12} {'measured s':>11} {'error':>8}   op kinds (summed time error)")
    for schedule in SCHEDULES:
        c = compare(pipesim, gpu, schedule, tmp)
        err = 100 * c["step_time_error"]
        errors.append(err)
        kinds = ", ".join(f"{k['kind']} {100 * (k['measured_s'] / k['predicted_s'] - 1):+.1f}%"
                          for k in c["op_kinds"] if k["predicted_s"] > 0)
        print(f"{gpu}: {schedule:<10} {c['predicted_step_time_s']:>12.4f} {c['measured_step_time_s']:>11.4f} "
              f"{err:>+7.1f}%   {kinds}")
        if abs(err) > STEP_BOUND_PCT:
            failures.append(f"{gpu} {schedule}: step error {err:+.1f}% beyond {STEP_BOUND_PCT}%")
        if schedule in ("1f1b", "zb-h1"):
            for k in c["op_kinds"]:
                kind_err = 100 * (k["measured_s"] / k["predicted_s"] - 1)
                if abs(kind_err) > KIND_BOUND_PCT:
                    failures.append(f"{gpu} {schedule} {k['kind']}: {kind_err:+.1f}% beyond {KIND_BOUND_PCT}%")
    mean_abs = sum(abs(e) for e in errors) / len(errors)
    print(f"{gpu}: mean absolute step error {mean_abs:.1f}%")
    if mean_abs > MEAN_BOUND_PCT:
        failures.append(f"{gpu}: mean absolute step error {mean_abs:.1f}% beyond {MEAN_BOUND_PCT}%")
    return failures


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim, check = sys.argv[1], "--check" in sys.argv
    gpus = [sys.argv[sys.argv.index("--gpu") + 1]] if "--gpu" in sys.argv else GPUS
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for gpu in gpus:
            failures += validate(pipesim, gpu, tmp)
    if check and failures:
        for f in failures:
            print("validate_replay: " + f, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
