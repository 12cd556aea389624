#!/usr/bin/env python3
"""Holds `pipesim collectives` to published nccl-tests results of the machines the shipped profiles describe
(nccl_tests_published.json): for each run, the predicted bus bandwidth at every published message size.

Usage: validate_collectives.py PIPESIM [--check]
With --check it exits 1 when a size's prediction is more than 15 % from the published bus bandwidth.

The 8 RTX 4090s without peer-to-peer: the profile holds the published machine's topology (each GPU on its own
root port) and its measured bus bandwidth through host memory at large messages (staged_busbw_GBps, the
published 32 MB figure); the sizes below it are NCCL's latency at work (a Simple ring's 8.4 us + 14 steps x
5.7 us over PCIe, LL128 being off without NVLink), which the profile does not hold.
"""
import json
import os
import subprocess
import sys

BOUND_PCT = 15.0
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    runs = json.load(open(os.path.join(HERE, "nccl_tests_published.json")))["runs"]
    worst = 0.0
    for run in runs:
        published = {int(k): v for k, v in run["busbw_GBps_by_bytes"].items()}
        sizes = sorted(published)
        out = subprocess.run([pipesim, "collectives", "--hw", run["hw"], "--op", run["op"], "--gpus-per-node",
                              str(run["gpus_per_node"]), "--nodes", str(run["nodes"]), "--min-bytes", str(sizes[0]),
                              "--max-bytes", str(sizes[-1]), "--format", "json"],
                             capture_output=True, text=True, check=True)
        predicted = {row["bytes"]: row for row in json.loads(out.stdout)["sizes"]}
        print(f"{run['name']} ({run['hw']}, {run['op']}): bus bandwidth, GB/s")
        print("| size | published | pipesim | error | algorithm |\n| ---: | ---: | ---: | ---: | --- |")
        for size in sizes:
            p = predicted[size]
            error = 100 * (p["busbw_GBps"] - published[size]) / published[size]
            worst = max(worst, abs(error))
            print(f"| {size >> 20} MiB | {published[size]:.2f} | {p['busbw_GBps']:.2f} | {error:+.1f}% | "
                  f"{p['algorithm']} |")
    print(f"largest error {worst:.1f}% (bound {BOUND_PCT}%)")
    if "--check" in sys.argv and worst > BOUND_PCT:
        print("FAIL: a predicted bus bandwidth is more than the bound from the published one")
        sys.exit(1)


if __name__ == "__main__":
    main()
