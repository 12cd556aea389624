#!/usr/bin/env python3
"""What scale costs: Llama-3-8B on 1 to 1,024 nodes of 8 H100s (tp 8 inside a node, data parallelism across
nodes, ZeRO-1, 16 microbatches of one 8K-token sequence per replica, so the pipeline's own share stays the same)
and its MFU with each mechanism that grows with the job switched on and off:

- the latency each collective step pays on NVLink and the network (the profile's latency_us, paid once per
  ring step, so a ring over N nodes pays it 2(N - 1) times per all-reduce), and
- stragglers (--gpu-speed-cv): every GPU keeps the pace of the expected slowest of the job's GPUs, here at a
  1 % coefficient of variation of a GPU's speed.

Usage: scaling_table.py PIPESIM [--check]
Prints the Markdown table the README shows. With --check it exits 1 unless the README holds the same table,
no mechanism raises the MFU, and the MFU with both mechanisms falls from 1 to 1,024 nodes.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [1, 8, 64, 256, 1024]
SPEED_CV = 0.01
HEADER = ("| nodes | GPUs | global batch | MFU as shipped | without step latency | with stragglers (1 %) | "
          "DP share of the step |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def latency_free_profile(tmp):
    """The shipped h100-sxm-8x with every step latency set to 0."""
    with open(os.path.join(ROOT, "hw_profiles", "h100-sxm-8x.json")) as f:
        profile = json.load(f)
    for part in (profile["node"]["pcie"], profile["node"]["nvlink"], profile["network"]):
        part["latency_us"] = 0.0
        part["sources"]["latency_us"] = "set to 0 to show what step latency costs"
    profile["name"] = "h100-sxm-8x-no-latency"
    path = os.path.join(tmp, "h100-no-latency.json")
    with open(path, "w") as f:
        json.dump(profile, f)
    return path


def simulate(pipesim, nodes, hw, speed_cv):
    cmd = [pipesim, "simulate", "--model", "llama3-8b", "--hw", hw, "--nodes", str(nodes), "--tp", "8",
           "--pp", "1", "--dp", str(nodes), "--global-batch", str(16 * nodes), "--microbatch-size", "1",
           "--seq", "8192", "--schedule", "1f1b", "--zero", "1", "--gpu-speed-cv", str(speed_cv),
           "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def table(pipesim):
    rows, mfus = [HEADER], []
    with tempfile.TemporaryDirectory() as tmp:
        no_latency = latency_free_profile(tmp)
        for n in NODES:
            shipped = simulate(pipesim, n, "h100-sxm-8x", 0)
            free = simulate(pipesim, n, no_latency, 0)
            slow = simulate(pipesim, n, "h100-sxm-8x", SPEED_CV)
            mfus.append((shipped["mfu"], free["mfu"], slow["mfu"]))
            rows.append(f"| {n:,} | {8 * n:,} | {16 * n:,} | {100 * shipped['mfu']:.1f} % | "
                        f"{100 * free['mfu']:.1f} % | {100 * slow['mfu']:.1f} % | "
                        f"{100 * shipped['time_breakdown']['dp_comm']:.1f} % |")
    return "\n".join(rows), mfus


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    text, mfus = table(os.path.abspath(sys.argv[1]))
    print(text)
    if "--check" not in sys.argv[2:]:
        return
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    problems = []
    if text not in readme:
        problems.append("README.md does not hold this table; paste it under 'What scale costs'")
    for n, (shipped, free, slow) in zip(NODES, mfus):
        if free < shipped or slow > shipped:
            problems.append(f"{n} nodes: a mechanism raised the MFU ({free:.4f}, {shipped:.4f}, {slow:.4f})")
    if not mfus[-1][2] < mfus[0][2]:
        problems.append("the MFU with both mechanisms does not fall from 1 to 1,024 nodes")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
