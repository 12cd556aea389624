#!/usr/bin/env python3
"""Fill jobs at scale: a 40B GPT (gpt-40b) with tp 8 x pp 16, microbatch 2 and a fixed global batch of 1024
sequences, from 1,024 to 8,192 GPUs (dp 8 -> 64): as dp grows each pipeline gets fewer microbatches and its
bubbles grow. For GPipe and 1F1B on A100 and H100 nodes, prints the bubble fraction, the main job's TFLOP/s per
GPU, the fill work (shipped inference jobs, max-efficiency policy) in GPU-equivalents and TFLOP/s per GPU, and
the main job's slowdown, as a Markdown table (used in the README).
Usage: scripts/fill_scale_study.py [path/to/pipesim]"""
import json
import subprocess
import sys

PIPESIM = sys.argv[1] if len(sys.argv) > 1 else "build/cli/pipesim"
FILL = "qwen3-1.7b-inference,llama3-8b-inference"


def simulate(hw, schedule, dp):
    cmd = [PIPESIM, "simulate", "--model", "gpt-40b", "--hw", hw, "--tp", "8", "--pp", "16", "--dp", str(dp),
           "--global-batch", "1024", "--microbatch-size", "2", "--schedule", schedule, "--fill-jobs", FILL,
           "--fill-policy", "max-efficiency", "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    print("| hardware | schedule | GPUs | microbatches per pipeline | bubble | main TFLOP/s per GPU | "
          "fill GPU-equivalents | fill TFLOP/s per GPU | main slowdown | busy without / with fill | "
          "fill work done (units) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for hw in ["a100-80g-sxm-8x", "h100-sxm-8x"]:
        for schedule in ["gpipe", "1f1b"]:
            for dp in [8, 16, 32, 64]:
                r = simulate(hw, schedule, dp)
                f = r["fill"]
                done = ", ".join(f"{j['name']} {j['units_done']}" for j in f["jobs"] if j["units_done"])
                print(f"| {hw} | {schedule} | {r['num_gpus']} | {1024 // (dp * 2)} | "
                      f"{100 * r['bubble_fraction']:.1f}% | {r['tflops_per_gpu']:.1f} | "
                      f"{f['fill_gpu_equivalents']:.0f} | {f['fill_tflops_per_gpu']:.1f} | "
                      f"{100 * f['main_slowdown']:.2f}% | {100 * f['utilization_without_fill']:.1f}% / "
                      f"{100 * f['utilization_with_fill']:.1f}% | {done or 'none'} |")


if __name__ == "__main__":
    main()
