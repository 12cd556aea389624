#!/usr/bin/env python3
"""Predicts torchtitan's published FSDP runs of Llama 3.1 8B on H100s (torchtitan_h100.json: 8 and 128 GPUs,
local batch 2 of 8192 tokens, torchtitan's per-op selective activation checkpointing, eager) with `--framework
torchtitan-2024-12 --zero 3 --recompute selective` (torchtitan as the benchmark ran it: its commit 9dec370), on
h100-sxm-8x given the benchmark hosts' memory (96 GB of HBM2e at 2.4 TB/s) and power limit (500 W), both from the
benchmark's notes.

Usage: validate_torchtitan.py PIPESIM [--check]
With --check it exits 1 when a run's peak memory leaves MEMORY_BOUND_PCT of the measured one (today -12.6 % and
-13.4 %; torchtitan reports the caching allocator's peak reserved, pipesim the tensors), or when the
throughput leaves THROUGHPUT_BOUND_PCT (today +16.0 % and +20.8 %; with today's torchtitan, `--framework fsdp`,
+47.6 % and +52.4 %; without the power limit as well, +59.5 % and +64.7 %; the benchmark's torchtitan without
it, +24.0 % and +29.3 %).
"""
import json
import os
import subprocess
import sys
import tempfile

MEMORY_BOUND_PCT = 15.0
THROUGHPUT_BOUND_PCT = 25.0
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def profile(tmp):
    """h100-sxm-8x with the benchmark hosts' HBM (96 GB at 2.4 TB/s) and their GPUs' 500 W power limit."""
    p = json.load(open(os.path.join(ROOT, "hw_profiles", "h100-sxm-8x.json")))
    p["name"] = "h100-hbm2e-96g-8x"
    p["gpu"]["hbm_bytes"] = 96 * 10**9
    p["gpu"]["hbm_GBps"] = 2400
    note = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md: 96GB HBM2e with 2.4 TB/sec"
    p["gpu"]["sources"]["hbm_bytes"] = note
    p["gpu"]["sources"]["hbm_GBps"] = note
    p["gpu"]["power_limit_W"] = 500
    p["gpu"]["sources"]["power_limit_W"] = ("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md: 'We used "
                                            "the default 500W power limit'")
    path = os.path.join(tmp, "h100-hbm2e.json")
    json.dump(p, open(path, "w"))
    return path


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    data = json.load(open(os.path.join(HERE, "torchtitan_h100.json")))
    failures = []
    print("torchtitan, Llama 3.1 8B, FSDP, local batch 2 x 8192, selective AC (negative: pipesim lower)")
    print("| run | GPUs | tokens/s/GPU measured | pipesim | error | memory measured | pipesim | error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        hw = profile(tmp)
        for run in data["runs"]:
            gpus = run["gpus"]
            cmd = [pipesim, "simulate", "--model", "llama3-8b", "--hw", hw, "--nodes", str(gpus // 8), "--dp",
                   str(gpus), "--zero", "3", "--framework", "torchtitan-2024-12", "--recompute", "selective",
                   "--microbatch-size", "2", "--seq", "8192", "--global-batch", str(run["global_batch"]),
                   "--schedule", "1f1b", "--format", "json"]
            r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            tps = run["global_batch"] * 8192 / r["step_time_s"] / gpus
            gib = r["peak_gpu_mem_bytes"] / 2**30
            tps_err = 100 * (tps - run["tokens_per_s_per_gpu"]) / run["tokens_per_s_per_gpu"]
            mem_err = 100 * (gib - run["memory_gib"]) / run["memory_gib"]
            print(f"| {run['table']} | {gpus} | {run['tokens_per_s_per_gpu']:,} | {tps:,.0f} | {tps_err:+.1f}% | "
                  f"{run['memory_gib']} GiB | {gib:.1f} GiB | {mem_err:+.1f}% |")
            if abs(mem_err) > MEMORY_BOUND_PCT or abs(tps_err) > THROUGHPUT_BOUND_PCT:
                failures.append(run["table"])
    if "--check" in sys.argv and failures:
        print(f"FAIL: {', '.join(failures)} beyond the bounds (memory {MEMORY_BOUND_PCT} %, throughput "
              f"{THROUGHPUT_BOUND_PCT} %)")
        sys.exit(1)


if __name__ == "__main__":
    main()
