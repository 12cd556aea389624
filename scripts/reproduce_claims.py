#!/usr/bin/env python3
"""Reproduces, with shipped profiles only, the published comparisons of the offload schedules:
RoundPipe vs the best baseline fine-tuning Qwen3 on rtx4090-8x, and SPipe vs Mobius on 4-GPU V100 / RTX 3090
nodes. Prints Markdown tables (used in the README). Usage: scripts/reproduce_claims.py [path/to/pipesim]"""
import json
import subprocess
import sys

PIPESIM = sys.argv[1] if len(sys.argv) > 1 else "build/cli/pipesim"


def simulate(*args):
    p = subprocess.run([PIPESIM, "simulate", "--format", "json", *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def roundpipe_table():
    print("| model | RoundPipe tokens/s | best baseline | its tokens/s | speed-up | baselines that fit |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model in ["qwen3-1.7b", "qwen3-8b", "qwen3-32b"]:
        rp = simulate("--model", model, "--hw", "rtx4090-8x", "--schedule", "roundpipe")
        candidates = []
        for s in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"]:
            for extra in [[], ["--optimizer-offload"]]:
                r = simulate("--model", model, "--hw", "rtx4090-8x", "--schedule", s, "--recompute", "full", *extra)
                if r and not r["oom"]:
                    candidates.append((r["tokens_per_s"], s + (" + optimizer offload" if extra else "") + ", full recompute"))
        for v in [2, 3, 4]:
            r = simulate("--model", model, "--hw", "rtx4090-8x", "--schedule", "mobius", "--virtual-stages", v)
            if r and not r["oom"]:
                candidates.append((r["tokens_per_s"], f"mobius, {v} stages per GPU"))
        best = max(candidates) if candidates else (0, "none fits")
        speedup = f"{rp['tokens_per_s'] / best[0]:.2f}x" if best[0] else "only RoundPipe fits"
        print(f"| {model} | {rp['tokens_per_s']:.0f} | {best[1]} | {best[0]:.0f} | {speedup} | {len(candidates)} of 11 |")


def spipe_table():
    print("| model | hardware | seq | SPipe step (s) | Mobius step (s) | speed-up | host memory needed (GiB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios = []
    for hw in ["v100-sxm2-4x", "rtx3090-4x"]:
        for model in ["llama2-13b", "llama-30b", "llama-65b"]:
            for seq in [1024, 2048]:
                common = ["--model", model, "--hw", hw, "--seq", seq, "--microbatch-size", 2, "--microbatches", 8]
                sp = simulate(*common, "--schedule", "spipe")
                mo = simulate(*common, "--schedule", "mobius")
                if not sp or not mo:
                    print(f"| {model} | {hw} | {seq} | n/a | n/a | n/a | n/a |")
                    continue
                ratio = mo["step_time_s"] / sp["step_time_s"]
                ratios.append(ratio)
                print(f"| {model} | {hw} | {seq} | {sp['step_time_s']:.2f} | {mo['step_time_s']:.2f} | {ratio:.2f}x | "
                      f"{sp['peak_host_mem_bytes'] / 2**30:.0f} |")
    if ratios:
        print(f"\nGeometric mean speed-up of SPipe over Mobius: {pow(eval('*'.join(map(str, ratios))), 1 / len(ratios)):.2f}x")


if __name__ == "__main__":
    roundpipe_table()
    print()
    spipe_table()
