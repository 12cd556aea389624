#!/usr/bin/env python3
"""Holds `pipesim collectives` to published nccl-tests results of the machines the shipped profiles describe
(nccl_tests_published.json): for each run, the predicted bus bandwidth at every published message size.

Usage: validate_collectives.py PIPESIM [--check]
With --check it exits 1 when a size's prediction is more than 15 % from the published bus bandwidth.

The 8 RTX 4090s without peer-to-peer: the profile holds the published machine's topology (each GPU on its own
root port) and its measured bus bandwidth through host memory at large messages (staged_busbw_GBps, the
published 32 MB figure); the sizes below it are NCCL's latency at work (a Simple ring's 8.4 us + 14 steps x
5.7 us over PCIe, LL128 being off without NVLink), which the profile does not hold.

AWS p5 nodes over EFA (nccl_tests_p5_efa.json: all_gather_perf and all_reduce_perf on 2 to 32 nodes, 32 MB
to 2 or 8 GB, with the EFA plugin's tuner): h100-p5-8x describes those nodes but holds the bus bandwidth of
another cluster (the Ultra-Scale Playbook's, by node count at 256 MB), so each op runs on h100-p5-8x given this
cluster's own figure the same way, its bus bandwidth at 2 GB by node count (`collective_busbw_by_nodes`); every
smaller size then comes from the model: NCCL's choice and latency with the 75 us the plugin reports added to each
network step (the plugin tunes p5 by its regions, which NCCL's own choice stands for), NVLS-tree among the
all-reduces, the bytes at the NIC rate that gives the 2 GB figure back. With --check it exits 1 when an op's
median error over its sizes and node counts leaves its bound in EFA_MEDIAN_BOUND_PCT, or its largest
EFA_LARGEST_BOUND_PCT (each held where it is).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

BOUND_PCT = 15.0
# Today, the 2 GB figures given left out: all-gather's median 11.7 %, its largest 27.4 % (21.0 % and 130.2 %
# with the plugin model's 23 us a network step; 12.8 % and 28.0 % with NCCL's choice weighing the ring's bytes at
# one NIC's rate, not the node's), all-reduce's 8.6 %, its largest 36.9 % (117.6 % with NCCL's own tree at the
# plugin model's steps; 10.4 % and 52.2 % with the plugin model's steps, tree and choice and no NVLS-tree; 9.6 %
# and 54.1 % with NVLS-tree but the plugin model for more than two nodes: p5 nodes are tuned by the plugin's
# regions, not its model).
EFA_MEDIAN_BOUND_PCT = {"all-gather": 12.0, "all-reduce": 9.0}
EFA_LARGEST_BOUND_PCT = {"all-gather": 27.5, "all-reduce": 37.5}
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
    failed = worst > BOUND_PCT
    if failed:
        print("FAIL: a predicted bus bandwidth is more than the bound from the published one")
    failed |= check_efa(pipesim)
    if "--check" in sys.argv and failed:
        sys.exit(1)


def efa_profile(tmp, data, op, measured):
    """The data's profile given this cluster's own bus bandwidth of `op` at `profile_bytes`, by node count."""
    with open(os.path.join(HERE, "..", "..", "hw_profiles", data["hw"] + ".json")) as f:
        profile = json.load(f)
    size = str(data["profile_bytes"])
    points = [{"nodes": int(n), "GBps": measured[n][size]} for n in sorted(measured, key=int)]
    profile["network"]["collective_busbw_by_nodes"] = {"message_bytes": data["profile_bytes"],
                                                        op.replace("-", "_"): points}
    profile["network"]["sources"]["collective_busbw_by_nodes"] = data["source"]
    path = os.path.join(tmp, op + ".json")
    with open(path, "w") as f:
        json.dump(profile, f)
    return path


def check_efa(pipesim):
    """Prints each op's predicted against published bus bandwidth by size and node count; True when an op's
    median error leaves its bound."""
    data = json.load(open(os.path.join(HERE, "nccl_tests_p5_efa.json")))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for run in data["runs"]:
            op, measured = run["op"], run["busbw_GBps"]
            hw = efa_profile(tmp, data, op, measured)
            nodes = sorted(measured, key=int)
            sizes = sorted({int(b) for by_size in measured.values() for b in by_size})
            predicted = {}
            for n in nodes:
                out = subprocess.run([pipesim, "collectives", "--hw", hw, "--op", op, "--nodes", n, "--min-bytes",
                                      str(sizes[0]), "--max-bytes", str(sizes[-1]), "--format", "json"],
                                     capture_output=True, text=True, check=True)
                predicted[n] = {row["bytes"]: row["busbw_GBps"] for row in json.loads(out.stdout)["sizes"]}
            print(f"\n{op} on p5 nodes over EFA, bus bandwidth GB/s published / pipesim (error), "
                  f"{data['profile_bytes'] >> 30} GB given by node count")
            print("| size | " + " | ".join(f"{n} nodes" for n in nodes) + " |")
            print("| ---: |" + " ---: |" * len(nodes))
            errors = []
            for size in sizes:
                cells = []
                for n in nodes:
                    published = measured[n].get(str(size))
                    if published is None:
                        cells.append("")
                        continue
                    error = 100 * (predicted[n][size] - published) / published
                    if size != data["profile_bytes"]:
                        errors.append(abs(error))
                    cells.append(f"{published:.0f} / {predicted[n][size]:.0f} ({error:+.0f}%)")
                print(f"| {size >> 20} MiB | " + " | ".join(cells) + " |")
            median, largest = statistics.median(errors), max(errors)
            bound, largest_bound = EFA_MEDIAN_BOUND_PCT[op], EFA_LARGEST_BOUND_PCT[op]
            print(f"{op}: median error {median:.1f}% over {len(errors)} sizes and node counts (the given one left "
                  f"out), largest {largest:.1f}% (bounds {bound}% and {largest_bound}%)")
            if median > bound or largest > largest_bound:
                print(f"FAIL: {op}'s error leaves its bounds")
                failed = True
    return failed


if __name__ == "__main__":
    main()
