#!/usr/bin/env python3
"""The scaling curve of a whole `pipesim simulate` process: gpt-40b, 1F1B, pp 8 x dp N with every GPU
instantiated (--replicas explicit, 16 microbatches of one sequence per pipeline), at 256 to 16,384 GPUs.
Prints the README's table (wall time, peak RSS, ops, simulated ops per second of the whole process, bytes of
peak RSS per op) and the fitted growth exponent of time and memory against ops (1.0 is linear).

    scripts/scaling_curve.py build/cli/pipesim [--repeat 3]

Wall time is the best of --repeat runs (the machine is shared); peak RSS is the kernel's ru_maxrss."""

import json
import math
import resource
import subprocess
import sys
import time

GPUS = [256, 1024, 4096, 8192, 16384]


def run_once(pipesim, dp):
    args = [pipesim, "simulate", "--model", "gpt-40b", "--hw", "h100-sxm-8x", "--pp", "8", "--dp", str(dp),
            "--global-batch", str(16 * dp), "--schedule", "1f1b", "--replicas", "explicit", "--format", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"pipesim failed at dp {dp}: {out.stderr.strip()}")
    # ru_maxrss of children is the largest so far: runs go from small to large, so it is this run's.
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(rss_kb, before) * 1024, json.loads(out.stdout)


def fit_exponent(xs, ys):
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    rows = []
    for gpus in GPUS:
        runs = [run_once(pipesim, gpus // 8) for _ in range(repeat)]
        wall = min(r[0] for r in runs)
        rss = runs[-1][1]
        ops = runs[0][2]["ops"]
        rows.append((gpus, wall, rss, ops, runs[0][2]["sim_wall_s"]))
    print("| GPUs | ops | whole process (s) | peak RSS (MB) | ops/s (whole process) | RSS bytes per op |")
    print("| --- | --- | --- | --- | --- | --- |")
    for gpus, wall, rss, ops, _ in rows:
        print(f"| {gpus:,} | {ops:,} | {wall:.3f} | {rss / 1e6:.0f} | {ops / wall / 1e6:.2f} M | {rss / ops:.0f} |")
    ops = [r[3] for r in rows]
    print(f"\nfitted growth against ops: time ~ ops^{fit_exponent(ops, [r[1] for r in rows]):.2f}, "
          f"peak RSS ~ ops^{fit_exponent(ops, [r[2] for r in rows]):.2f}")


if __name__ == "__main__":
    main()
