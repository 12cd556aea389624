#!/usr/bin/env python3
"""What scale costs: Llama-3-8B on 1 to 1,024 nodes of 8 H100s (tp 8 inside a node, data parallelism across
nodes, ZeRO-1, 16 microbatches of one 8K-token sequence per replica, so the pipeline's own share stays the same)
and its MFU with each mechanism that grows with the job switched on and off:

- collectives' latency as NCCL's tuning model gives it for the algorithm and protocol NCCL picks
  (--collective-latency nccl, the default: a ring's latency grows with its steps, 2(N - 1) of them for an
  all-reduce over N nodes, until a tree's log N or PAT is cheaper), against none at all (none), and
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [1, 8, 64, 256, 1024]
SPEED_CV = 0.01
HEADER = ("| nodes | GPUs | global batch | MFU as shipped | without collective latency | with stragglers (1 %) | "
          "DP share of the step |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def simulate(pipesim, nodes, latency, speed_cv):
    cmd = [pipesim, "simulate", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--nodes", str(nodes), "--tp", "8",
           "--pp", "1", "--dp", str(nodes), "--global-batch", str(16 * nodes), "--microbatch-size", "1",
           "--seq", "8192", "--schedule", "1f1b", "--zero", "1", "--gpu-speed-cv", str(speed_cv),
           "--collective-latency", latency,
           "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def table(pipesim):
    rows, mfus = [HEADER], []
    for n in NODES:
        shipped = simulate(pipesim, n, "nccl", 0)
        free = simulate(pipesim, n, "none", 0)
        slow = simulate(pipesim, n, "nccl", SPEED_CV)
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
