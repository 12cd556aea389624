#!/usr/bin/env python3
"""Predicts the one-node runs of the HF Ultra-Scale Playbook's nanotron sweep (ultrascale_playbook_1B_3B.csv: its
1B and 3B Llama-style models on 8 H100s, seq 4096, global batch 256 sequences, every DP x TP x PP split,
microbatch size and ZeRO-0/1 tried) with the shipped h100-p5-8x profile (the cluster the sweep ran on: AWS p5
nodes, EFA, its collectives' bus bandwidth measured by node count) and `--framework nanotron`: step time (from
tok/s), rank 0's peak memory, and whether the runs that crashed or ran out of memory (MFU nan) are predicted not
to fit.

Usage: validate_ultrascale.py PIPESIM [--check] [--framework NAME] [--all-nodes]
With --all-nodes it also prints the step time's median error of the runs that ran on each node count (1 to 64
nodes); with --check too it exits 1 when a node count's median leaves its bound in NODE_MEDIAN_BOUND_PCT (the
issue's goal is 15 % on every count; each is held where it is).
Source: the Ultra-Scale Playbook's benchmark results (huggingface/nanotron, scripts/scaling_benchmarks.py for the
model shapes: 1B 16 layers, hidden 2048, 32 heads, ffn 8192; 3B 28 layers, hidden 3072, 32 heads, ffn 8192; MHA,
SwiGLU, vocabulary 131,072, tied embeddings); nanotron runs one 1F1B flush of GradAcc microbatches per step.

With --check it exits 1 when a figure leaves the bounds below: the step and memory medians within 10 % (today
-9.7 % and -6.5 %); of the 66 failures whose very configuration no other row of the sweep ran through, at most
the 6 predicted to fit today (the goal is 2 %, one). A failed row whose
configuration (model, DP, TP, PP, microbatch, accumulation, ZeRO) also ran in the sweep cannot tell that the run
ran out of memory, so the count of failures predicted to fit leaves those out.
"""
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

STEP_MEDIAN_BOUND_PCT = 10.0
MEMORY_MEDIAN_BOUND_PCT = 10.0
FAILED_PREDICTED_TO_FIT_MAX = 6
# Medians today: -15.2 % (2 nodes), -25.0 (4), -28.7 (8), -26.6 (16), -46.9 (32), -68.4 (64), with nanotron's
# rank order (its framework file).
NODE_MEDIAN_BOUND_PCT = {2: 16.0, 4: 26.0, 8: 30.0, 16: 28.0, 32: 48.0, 64: 69.5}
HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"1B": (16, 2048, 32, 8192), "3B": (28, 3072, 32, 8192)}
SEQ = 4096
# The sweep's "GPU memory" is labelled GB but is nanotron's GiB: src/nanotron/helpers.py create_table_log logs
# torch.cuda.max_memory_allocated() / 1024**3 ("Mem Alloc (GB)") and max_memory_reserved() / 1024**3 ("Mem Res").
GIB = 1024**3
HW = "h100-p5-8x"  # the cluster the sweep ran on: AWS p5 nodes, EFA, its collectives measured by node count


def model_file(tmp, name):
    layers, hidden, heads, ffn = SHAPES[name]
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"format": "pipesim-model", "version": 1, "name": f"ultrascale-{name}",
                   "source": "nanotron scripts/scaling_benchmarks.py", "hidden_size": hidden, "num_layers": layers,
                   "num_heads": heads, "num_kv_heads": heads, "ffn_hidden_size": ffn, "vocab_size": 131072,
                   "tie_embeddings": True, "mlp": "swiglu"}, f)
    return path


def failed_run(r):
    return r["MFU"].startswith("nan") or not r["tok/s"]


def config(r):
    return tuple(r[k] for k in ("model", "DP", "TP", "PP", "MBS", "GradAcc", "ZeRO"))


def launch_flags(r):
    """The sweep's launcher (nanotron scripts/scaling_benchmarks.py create_config: tp_mode REDUCE_SCATTER by default,
    tp_linear_async_communication when in that mode): sequence parallelism, and TP communication beside the GEMMs."""
    return ["--sequence-parallel", "--tp-overlap", "backward"] if int(r["TP"]) > 1 else []


def predict(pipesim, tmp, framework, r):
    cmd = [pipesim, "simulate", "--model", os.path.join(tmp, r["model"] + ".json"), "--hw", HW,
           "--nodes", r["Nodes"], "--dp", r["DP"], "--tp", r["TP"], "--pp", r["PP"], "--microbatch-size", r["MBS"],
           "--global-batch", r["GBS"], "--seq", str(SEQ), "--schedule", "1f1b", "--framework", framework,
           "--format", "json"] + (["--zero", "1"] if r["ZeRO"] == "1" else []) + launch_flags(r)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"pipesim simulate failed: {' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def print_node_counts(pipesim, framework):
    with open(os.path.join(HERE, "ultrascale_playbook_1B_3B.csv")) as f:
        # A pipeline deeper than the model's blocks (3B at pp 32) is refused: those runs are left out.
        rows = [r for r in csv.DictReader(f) if not failed_run(r) and int(r["PP"]) <= SHAPES[r["model"]][0]]
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            model_file(tmp, name)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(lambda r: predict(pipesim, tmp, framework, r), rows))
    errors = {}
    for r, p in zip(rows, results):
        measured = 256 * SEQ / float(r["tok/s"].replace(",", ""))
        errors.setdefault(int(r["Nodes"]), []).append(100 * (p["step_time_s"] - measured) / measured)
    print("| nodes | runs | step median error |\n| ---: | ---: | ---: |")
    out_of_bounds = []
    for nodes in sorted(errors):
        median = statistics.median(errors[nodes])
        print(f"| {nodes} | {len(errors[nodes])} | {median:+.1f}% |")
        if abs(median) > NODE_MEDIAN_BOUND_PCT.get(nodes, 100.0):
            out_of_bounds.append(f"{nodes} nodes {median:+.1f}% (bound {NODE_MEDIAN_BOUND_PCT[nodes]}%)")
    return out_of_bounds


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim, args = sys.argv[1], sys.argv[2:]
    framework = args[args.index("--framework") + 1] if "--framework" in args else "nanotron"
    with open(os.path.join(HERE, "ultrascale_playbook_1B_3B.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["Nodes"] == "1"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            model_file(tmp, name)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(lambda r: predict(pipesim, tmp, framework, r), rows))
    ran = {config(r) for r in rows if not failed_run(r)}
    steps, memory, failed, failed_fit = [], [], 0, 0
    for r, p in zip(rows, results):
        if failed_run(r):
            if config(r) in ran:
                continue  # the same configuration also ran: this failure is not memory evidence
            failed += 1
            failed_fit += 0 if p["oom"] else 1
            continue
        measured = 256 * SEQ / float(r["tok/s"].replace(",", ""))
        steps.append(100 * (p["step_time_s"] - measured) / measured)
        measured_bytes = float(r["GPU memory"].split()[0]) * GIB
        memory.append(100 * (p["peak_gpu_mem_bytes"] - measured_bytes) / measured_bytes)
    step_median, memory_median = statistics.median(steps), statistics.median(memory)
    print(f"Ultra-Scale Playbook, one node of 8 H100s, --framework {framework} (negative: pipesim faster or "
          "smaller than measured)")
    print(f"{len(steps)} runs: step time median error {step_median:+.1f}%, mean absolute "
          f"{statistics.mean(abs(e) for e in steps):.1f}%; rank-0 peak memory median error {memory_median:+.1f}%")
    print(f"{failed} runs that crashed or ran out of memory (and whose configuration never ran): {failed_fit} "
          "predicted to fit")
    out_of_bounds = print_node_counts(pipesim, framework) if "--all-nodes" in args else []
    if "--check" in args and out_of_bounds:
        print("FAIL: node counts beyond their bounds: " + ", ".join(out_of_bounds))
        sys.exit(1)
    if "--check" in args and (abs(step_median) > STEP_MEDIAN_BOUND_PCT or abs(memory_median) > MEMORY_MEDIAN_BOUND_PCT
                              or failed_fit > FAILED_PREDICTED_TO_FIT_MAX):
        print(f"FAIL: bounds are step median within {STEP_MEDIAN_BOUND_PCT}%, memory median within "
              f"{MEMORY_MEDIAN_BOUND_PCT}%, at most {FAILED_PREDICTED_TO_FIT_MAX} failed runs predicted to fit")
        sys.exit(1)


if __name__ == "__main__":
    main()
