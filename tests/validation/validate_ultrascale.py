#!/usr/bin/env python3
"""Predicts the one-node runs of the HF Ultra-Scale Playbook's nanotron sweep (ultrascale_playbook_1B_3B.csv: its
1B and 3B Llama-style models on 8 H100s, seq 4096, global batch 256 sequences (ten runs ran another: each run
is simulated at the batch it ran, sequences()), every DP x TP x PP split,
microbatch size and ZeRO-0/1 tried) with the shipped h100-p5-8x profile (the cluster the sweep ran on: AWS p5
nodes, EFA, its collectives' bus bandwidth measured by node count) and `--framework nanotron`: step time (from
tok/s), rank 0's peak memory, and whether the runs that crashed or ran out of memory (MFU nan) are predicted not
to fit.

Usage: validate_ultrascale.py PIPESIM [--check] [--framework NAME] [--all-nodes] [--tp-across-nodes]
With --all-nodes it also prints the step time's median error of the runs that ran on each node count (1 to 64
nodes), of all of them and of those that measured the framework as it runs: the sweep's own log flags the runs
made before a fix to its nanotron branch's pipeline (after_pp_fix False), and its pipelines across nodes made
before it took 8 times as long (median step 18.8 s against 2.3 s after it), so those are left out of the second
column. The third column simulates each of those runs on the network its own job measured at its start (the
log's six bandwidths, below) instead of the profile's medians of the cluster, and splits them by the pool of nodes
the job landed on. With --check too it exits 1 when a node count's median in the second column leaves its bound
in NODE_MEDIAN_BOUND_PCT, or in the third OWN_NETWORK_BOUND_PCT (the issue's goal is 15 % on every count; each
is held where it is). With --tp-across-nodes
it prints, for the layouts whose TP groups span nodes (pp 1, tp 16 and 32, ZeRO-0, microbatch 1 and 16), a
microbatch's share of the step measured and predicted by node count, with the network shared by the job and by
the group alone (docs/fidelity.md, "TP groups across nodes, layout by layout").
Source: the Ultra-Scale Playbook's benchmark results (huggingface/nanotron, scripts/scaling_benchmarks.py for the
model shapes: 1B 16 layers, hidden 2048, 32 heads, ffn 8192; 3B 28 layers, hidden 3072, 32 heads, ffn 8192; MHA,
SwiGLU, vocabulary 131,072, tied embeddings); nanotron runs one 1F1B flush of GradAcc microbatches per step.

The sweep's own log of every run that ran (ultrascale_bench_log.csv: the benchmark CSV nanotron's
src/nanotron/helpers.py log_throughput wrote, as republished in eyao600/Rapid-LLM
validation_scripts/huggingface_data/bench_final2_mod_add.csv; each row joined to the playbook's by configuration
and its reserved peak, which all 1,127 match) gives more facts per run:
- "Local Params", rank 0's parameters: the split the run really had. Where a block's cumulative cost meets a
  rank's share exactly (the 1B model at pp 2 and 4), most runs put that block on the next rank, one block fewer on
  rank 0 than build_model's rule; those runs are simulated with their own split (--partition).
- "Mem Alloc", torch.cuda.max_memory_allocated() since nanotron's last reset_peak_memory_stats (trainer.py
  training_step's log_memory after each of the first five train_batch_iter calls): the optimizer step's peak,
  rank 0's memory with no activations. The playbook's "GPU memory" is "Mem Res", max_memory_reserved(): the
  caching allocator's segments, the tensors and what the allocator keeps around them.
- The network the job measured before training (src/nanotron/trainer.py measure_bandwidth, the sweep's branch
  at 67c5ebb6): bus bandwidth of an all-reduce, reduce-scatter and all-gather of 1 GiB (256 Mi fp32 elements;
  its comment says "256MB in elements") over all the job's GPUs ("AllReduce",
  "ReduceScatter", "AllGather") and over each node's eight ("AR/RS/AG Intra-node"), and the job's Slurm id. The
  one-node all-reduce splits the sweep into two pools of nodes, 449-462 GB/s and 407-435, whose jobs alternate
  through it: the first's all-reduce over 4 to 64 nodes holds 175-207 GB/s, the second's halves with each
  doubling of nodes from 4 on (160 to 13 GB/s), and most pipelines across nodes ran on the second.

With --check it exits 1 when a figure leaves the bounds below: the step median within the goal of 10 % (today
-9.6 %) and the memory median within 10 % (today -8.8 %); of the 66 failures whose very configuration no
other row of the sweep ran through, at most the goal's 2 %, one (today one: 1B at dp 1, tp 8 and microbatch 32,
predicted at 49.9 of 73.4 GiB; its vocabulary-sharded fp32 logits are 2^31 elements, one past a signed 32-bit
index, which may be what it failed on); each GPU's capacity is the 80 GB less the CUDA runtime's memory and the
NCCL communicators' buffers nanotron's process groups hold (its framework file, `nccl_communicators`); rank 0's memory
at the optimizer step (from the simulated trace) against "Mem Alloc" within 2 % at the median (today -0.6 %)
and 4 % on every run (today -2.6 % at most). A failed row whose configuration (model, DP, TP, PP, microbatch,
accumulation, ZeRO) also ran in the sweep cannot tell that the run ran out of memory, so the count of failures
predicted to fit leaves those out.
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
FAILED_PREDICTED_TO_FIT_MAX = 1
STATE_MEDIAN_BOUND_PCT = 2.0
STATE_MAX_BOUND_PCT = 4.0
# Medians today of the runs that measured the framework (those the sweep logged after its pipeline fix, or that
# never ran a pipeline across nodes): -10.7 % (2 nodes), -18.1 (4), -20.3 (8), -17.8 (16), -20.3 (32), +26.5 (64),
# with nanotron's rank order (its framework file), each run's own pipeline split, the cluster's one-node
# all-gather and reduce-scatter rates, and NCCL's own network step plus the latency the EFA plugin reports. That
# last took 32 nodes from -18.0 and 64 from +36.9: its TP groups across nodes, priced on the job's fabric, come
# out less slow, and balance less of the pipelines' optimism (docs/fidelity.md). NCCL's choice of protocol
# weighing the bytes as its model does (the node's NICs together, not one) and the all-reduces taken from the
# plugin's model (p5 is tuned by its regions) moved 8 nodes from -20.8, 16 from -19.0 and 32 from -21.5; the
# gradients reduced one DDP bucket (25 MiB of bf16 parameters) a collective, as nanotron's reducer does, rather
# than a layer or more, moved 4 nodes from -18.6, 8 from -21.4 and 16 from -18.8; each run at the batch it ran
# (sequences()) 4 from -18.4 and 8 from -21.0.
NODE_MEDIAN_BOUND_PCT = {2: 11.5, 4: 18.5, 8: 21.0, 16: 18.5, 32: 21.0, 64: 27.0}
# The same runs, each on the network its own job measured at its start (ultrascale_bench_log.csv: nanotron's
# measure_bandwidth over the job's GPUs and over one node, 1 GiB), held where they are: -8.5 % (1 node), -9.6 (2),
# -16.8 (4), -17.2 (8), -15.5 (16), -16.6 (32), -6.4 (64) (NCCL's tree corrections and ring plateau moved 8 from
# -17.6 and 32 from -17.8). The sweep ran on two pools of nodes (node_pool): on
# their own networks the runs of both come out -14 to -18 % on 4 to 16 nodes; the pipelines' time a microbatch
# that grows with tp and the blocks a stage holds is the 425 GB/s pool's alone (docs/fidelity.md).
OWN_NETWORK_BOUND_PCT = {1: 9.5, 2: 10.5, 4: 17.5, 8: 18.5, 16: 16.5, 32: 18.5, 64: 7.5}
# Between the one-node all-reduce of the sweep's two pools of nodes (407-435 and 449-462 GB/s, node_pool).
POOL_BOUNDARY_GBPS = 440.0
# nanotron's measure_bandwidth: torch.ones(256 * 1024 * 1024), fp32 (its comment: "256MB in elements").
JOB_MEASUREMENT_BYTES = 4 * 256 * 1024 * 1024
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPES = {"1B": (16, 2048, 32, 8192), "3B": (28, 3072, 32, 8192)}
SEQ = 4096
VOCAB = 131072
# The sweep's "GPU memory" is labelled GB but is nanotron's GiB: src/nanotron/helpers.py create_table_log logs
# torch.cuda.max_memory_allocated() / 1024**3 ("Mem Alloc (GB)") and max_memory_reserved() / 1024**3 ("Mem Res"),
# and the playbook's column is the latter.
GIB = 1024**3
HW = "h100-p5-8x"  # the cluster the sweep ran on: AWS p5 nodes, EFA, its collectives measured by node count


def model_file(tmp, name):
    layers, hidden, heads, ffn = SHAPES[name]
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"format": "pipesim-model", "version": 1, "name": f"ultrascale-{name}",
                   "source": "nanotron scripts/scaling_benchmarks.py", "hidden_size": hidden, "num_layers": layers,
                   "num_heads": heads, "num_kv_heads": heads, "ffn_hidden_size": ffn, "vocab_size": VOCAB,
                   "tie_embeddings": True, "mlp": "swiglu"}, f)
    return path


def failed_run(r):
    return r["MFU"].startswith("nan") or not r["tok/s"]


def sequences(r):
    """The sequences of a run's step as it ran: nanotron's global batch, micro_batch_size x
    batch_accumulation_per_replica x dp (src/nanotron/trainer.py DistributedTrainer.__init__), from which it
    computed tokens_per_sec (train_step_logs). The playbook's GBS column is the sweep's target of 256; ten runs
    ran another batch (1B at dp 16, pp 2, microbatch 8 and one accumulation step: 128, as the sweep's log
    records it, "gbs" 128)."""
    return int(r["DP"]) * int(r["MBS"]) * int(r["GradAcc"])


def measured_step_s(r):
    """The run's step time from its throughput: its third step alone (nanotron's benchmark mode logs
    log_throughput at iteration_step 3 and exits, src/nanotron/trainer.py train_step_logs)."""
    return sequences(r) * SEQ / float(r["tok/s"].replace(",", ""))


def config(r):
    return tuple(r[k] for k in ("model", "DP", "TP", "PP", "MBS", "GradAcc", "ZeRO"))


def launch_flags(r):
    """The sweep's launcher (nanotron scripts/scaling_benchmarks.py create_config: tp_mode REDUCE_SCATTER by default,
    tp_linear_async_communication when in that mode): sequence parallelism, and TP communication beside the GEMMs."""
    return ["--sequence-parallel", "--tp-overlap", "backward"] if int(r["TP"]) > 1 else []


def nanotron_split(name, pp, ties_advance):
    """Decoder blocks per stage by nanotron's build_model (src/nanotron/models/base.py): the blocks' cumulative
    costs (LlamaModel.get_block_compute_costs: a decoder layer 4 h^2 + 3 ffn h, the lm_head vocab h) placed on
    a rank until they pass (rank + 1) / pp of the total. ties_advance: a block that reaches its rank's share
    exactly ends the rank (the split most of the sweep's 1B runs at pp 2 and 4 recorded) rather than passing
    it (build_model's `>` at every published commit)."""
    layers, hidden, _, ffn = SHAPES[name]
    block, head = 4 * hidden * hidden + 3 * ffn * hidden, VOCAB * hidden
    total = layers * block + head
    blocks, rank, cumulative = [0] * pp, 0, 0
    for _ in range(layers):
        blocks[rank] += 1
        cumulative += block
        share = total * (rank + 1) / pp
        if cumulative > share or (ties_advance and cumulative == share):
            rank += 1
    return blocks


def recorded_rank0_blocks(name, tp, local_params):
    """Rank 0's decoder blocks from the parameters the run logged for it (nanotron's "Local Params", 3 significant
    digits): the tied embedding (vocab h / tp) and its blocks (4 h^2 + 3 ffn h each / tp)."""
    layers, hidden, _, ffn = SHAPES[name]
    scale = {"K": 1e3, "M": 1e6, "G": 1e9}
    local = float(local_params[:-1]) * scale[local_params[-1]]
    return round((local * tp - VOCAB * hidden) / (4 * hidden * hidden + 3 * ffn * hidden))


def partition_flags(r, local_params):
    """The run's own split where its rank 0 held one block fewer than build_model's rule gives (a tie between
    a block's cumulative cost and a rank's share: the 1B model at pp 2 and 4); none otherwise."""
    pp = int(r["PP"])
    if pp == 1 or local_params is None:
        return []
    rule = nanotron_split(r["model"], pp, ties_advance=False)
    if recorded_rank0_blocks(r["model"], int(r["TP"]), local_params) != rule[0] - 1:
        return []
    split = nanotron_split(r["model"], pp, ties_advance=True)
    return ["--partition", ",".join(map(str, split))] if min(split) > 0 else []


def bench_log():
    """The sweep's own log of each run that ran (ultrascale_bench_log.csv), by configuration and rank 0's
    reserved peak: its logged local parameters and allocated peak."""
    with open(os.path.join(HERE, "ultrascale_bench_log.csv")) as f:
        return {config(r) + (round(float(r["Mem Res (GiB)"]), 1),): r for r in csv.DictReader(f)}


def logged(bench, r):
    """The bench log's row for a run of the playbook's table that ran, or None."""
    if failed_run(r):
        return None
    return bench.get(config(r) + (float(r["GPU memory"].split()[0]),))


def predict(pipesim, tmp, framework, r, local_params=None, trace=None, extra=(), hw=HW):
    cmd = [pipesim, "simulate", "--model", os.path.join(tmp, r["model"] + ".json"), "--hw", hw,
           "--nodes", r["Nodes"], "--dp", r["DP"], "--tp", r["TP"], "--pp", r["PP"], "--microbatch-size", r["MBS"],
           "--global-batch", str(sequences(r)), "--seq", str(SEQ), "--schedule", "1f1b", "--framework", framework,
           "--format", "json"] + (["--zero", "1"] if r["ZeRO"] == "1" else []) + launch_flags(r) + \
        partition_flags(r, local_params) + (["--trace", trace] if trace else []) + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"pipesim simulate failed: {' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def node_pool(log):
    """The pool of nodes a run's job landed on, by the all-reduce it measured inside one node at its start: the
    sweep's nodes measured either 449-462 GB/s or 407-435 (one job 45), never between, jobs of both pools
    alternating through the sweep (ultrascale_bench_log.csv, "AR Intra-node")."""
    return "458" if float(log["AR Intra-node (GB/s)"]) >= POOL_BOUNDARY_GBPS else "425"


def job_network_profile(tmp, log, nodes):
    """h100-p5-8x with the network the run's own job measured at its start (nanotron src/nanotron/trainer.py
    measure_bandwidth at the sweep's branch: torch.ones(256 * 1024 * 1024), fp32, so 1 GiB, all-reduced,
    reduce-scattered and all-gathered 10 times over all the job's GPUs and over each node's eight): its
    `collective_busbw_by_nodes` at 1 GiB, the node's figures as one node and the job's as its node count."""
    with open(os.path.join(ROOT, "hw_profiles", HW + ".json")) as f:
        profile = json.load(f)
    network = {"message_bytes": JOB_MEASUREMENT_BYTES}
    for kind, job, node in (("all_reduce", "AllReduce (GB/s)", "AR Intra-node (GB/s)"),
                            ("all_gather", "AllGather (GB/s)", "AG Intra-node (GB/s)"),
                            ("reduce_scatter", "ReduceScatter (GB/s)", "RS Intra-node (GB/s)")):
        network[kind] = [{"nodes": 1, "GBps": float(log[node])}] + \
            ([{"nodes": nodes, "GBps": float(log[job])}] if nodes > 1 else [])
    profile["network"]["collective_busbw_by_nodes"] = network
    profile["network"]["sources"]["collective_busbw_by_nodes"] = f"measured by the run's own job {log['job_id']}"
    path = os.path.join(tmp, f"job-{log['job_id']}.json")
    with open(path, "w") as f:
        json.dump(profile, f)
    return path


def optimizer_step_peak_bytes(trace):
    """Rank 0's peak memory from its optimizer step's start to the step's end, in a simulated Chrome trace (its
    `memory` counter, GiB, and its `optimizer` span): what nanotron's allocated peak counts after its last
    reset (the backward's activations are gone by then)."""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    start = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") == "optimizer" and e["pid"] == 0)
    # In the trace's order (stable in time): a marker that allocates and frees at one instant leaves its
    # later sample last.
    samples = sorted(((e["ts"], e["args"]["GiB"]) for e in events if e.get("ph") == "C" and e["pid"] == 0),
                     key=lambda sample: sample[0])
    at_start = [gib for ts, gib in samples if ts <= start][-1]
    return max([at_start] + [gib for ts, gib in samples if ts > start]) * GIB


def print_node_counts(pipesim, framework):
    with open(os.path.join(HERE, "ultrascale_playbook_1B_3B.csv")) as f:
        # A pipeline deeper than the model's blocks (3B at pp 32) is refused: those runs are left out.
        rows = [r for r in csv.DictReader(f) if not failed_run(r) and int(r["PP"]) <= SHAPES[r["model"]][0]]
    bench = bench_log()
    logs = [logged(bench, r) for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            model_file(tmp, name)
        # The runs the second column keeps, each on its own job's network.
        own = [job_network_profile(tmp, log, int(r["Nodes"])) if log and not before_pipeline_fix(log) else None
               for r, log in zip(rows, logs)]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            shipped = list(pool.map(lambda r, log: predict(pipesim, tmp, framework, r, (log or {}).get("Local Params")),
                                    rows, logs))
            measured_network = list(pool.map(
                lambda r, log, hw: predict(pipesim, tmp, framework, r, log.get("Local Params"), hw=hw) if hw else None,
                rows, logs, own))
    errors, fixed, by_pool, own_network = {}, {}, {}, {}
    for r, log, p, q in zip(rows, logs, shipped, measured_network):
        measured = measured_step_s(r)
        nodes = int(r["Nodes"])
        error = 100 * (p["step_time_s"] - measured) / measured
        errors.setdefault(nodes, []).append(error)
        if before_pipeline_fix(log):
            continue
        fixed.setdefault(nodes, []).append(error)
        if log:
            own_error = 100 * (q["step_time_s"] - measured) / measured
            own_network.setdefault(nodes, []).append(own_error)
            by_pool.setdefault((node_pool(log), nodes), []).append(own_error)

    def cell(values):
        return f"{statistics.median(values):+.1f}% ({len(values)})" if values else "–"

    print("| nodes | runs | step median error | runs less the pipelines logged before the fix | their median error "
          "| each on the network its job measured | those on the 458 GB/s pool's nodes | on the 425 GB/s pool's |\n"
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    out_of_bounds = []
    for nodes in sorted(errors):
        median, median_fixed = statistics.median(errors[nodes]), statistics.median(fixed[nodes])
        print(f"| {nodes} | {len(errors[nodes])} | {median:+.1f}% | {len(fixed[nodes])} | {median_fixed:+.1f}% | "
              f"{cell(own_network.get(nodes))} | {cell(by_pool.get(('458', nodes)))} | "
              f"{cell(by_pool.get(('425', nodes)))} |")
        if abs(median_fixed) > NODE_MEDIAN_BOUND_PCT.get(nodes, 100.0):
            out_of_bounds.append(f"{nodes} nodes {median_fixed:+.1f}% (bound {NODE_MEDIAN_BOUND_PCT[nodes]}%)")
        own_median = statistics.median(own_network[nodes])
        if abs(own_median) > OWN_NETWORK_BOUND_PCT.get(nodes, 100.0):
            out_of_bounds.append(f"{nodes} nodes on their jobs' networks {own_median:+.1f}% "
                                 f"(bound {OWN_NETWORK_BOUND_PCT[nodes]}%)")
    return out_of_bounds


def print_tp_across_nodes(pipesim, framework):
    """The runs whose TP groups span nodes (pp 1, tp 16 and 32) at microbatch 1 and 16, by layout: a microbatch's
    share of the step (step / accumulation steps) measured and predicted, with the network shared by the job's
    nodes (the default) and by the group's own. The same layout on more nodes adds only data-parallel replicas,
    whose gradient reduction runs once a step."""
    with open(os.path.join(HERE, "ultrascale_playbook_1B_3B.csv")) as f:
        rows = [r for r in csv.DictReader(f) if not failed_run(r) and r["PP"] == "1" and int(r["TP"]) >= 16
                and r["MBS"] in ("1", "16") and r["ZeRO"] == "0"]
    rows.sort(key=lambda r: (r["model"], int(r["TP"]), int(r["MBS"]), int(r["Nodes"])))
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            model_file(tmp, name)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            shared = list(pool.map(lambda r: predict(pipesim, tmp, framework, r), rows))
            alone = list(pool.map(lambda r: predict(pipesim, tmp, framework, r, extra=("--network-sharing", "alone")),
                                  rows))
    print("| model | tp | microbatch | nodes | dp | measured s a microbatch | pipesim | error | "
          "--network-sharing alone | error |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r, s, a in zip(rows, shared, alone):
        steps = int(r["GradAcc"])
        measured = measured_step_s(r) / steps
        cells = [f"{p['step_time_s'] / steps:.3f} | {100 * (p['step_time_s'] / steps - measured) / measured:+.0f}%"
                 for p in (s, a)]
        print(f"| {r['model']} | {r['TP']} | {r['MBS']} | {r['Nodes']} | {r['DP']} | {measured:.3f} | "
              + " | ".join(cells) + " |")


def before_pipeline_fix(log):
    """A pipeline across nodes the sweep logged before its pipeline fix (its own after_pp_fix column, False):
    those runs measured a fault of the sweep's nanotron branch that it then fixed (their median step is 8x that
    of the runs after it), not the framework as it runs."""
    return log is not None and log["after_pp_fix"] == "False" and int(log["PP"]) > 1 and int(log["Nodes"]) > 1


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim, args = sys.argv[1], sys.argv[2:]
    framework = args[args.index("--framework") + 1] if "--framework" in args else "nanotron"
    with open(os.path.join(HERE, "ultrascale_playbook_1B_3B.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["Nodes"] == "1"]
    bench = bench_log()
    local = {id(r): (logged(bench, r) or {}).get("Local Params") for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            model_file(tmp, name)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            traces = {id(r): os.path.join(tmp, f"{i}.trace.json") for i, r in enumerate(rows) if logged(bench, r)}
            results = list(pool.map(lambda r: predict(pipesim, tmp, framework, r, local[id(r)], traces.get(id(r))),
                                    rows))
        state_errors = []
        for r in rows:
            if id(r) in traces:
                measured_bytes = float(logged(bench, r)["Mem Alloc (GiB)"]) * GIB
                predicted = optimizer_step_peak_bytes(traces[id(r)])
                state_errors.append(100 * (predicted - measured_bytes) / measured_bytes)
    ran = {config(r) for r in rows if not failed_run(r)}
    steps, memory, failed, failed_fit = [], [], 0, 0
    for r, p in zip(rows, results):
        if failed_run(r):
            if config(r) in ran:
                continue  # the same configuration also ran: this failure is not memory evidence
            failed += 1
            failed_fit += 0 if p["oom"] else 1
            continue
        measured = measured_step_s(r)
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
    state_median = statistics.median(state_errors)
    state_max = max(state_errors, key=abs)
    print(f"{len(state_errors)} runs: memory at the optimizer step (rank 0's peak from its start to the step's end, "
          f"against the allocated peak the run logged after its last reset) median error {state_median:+.1f}%, "
          f"largest {state_max:+.1f}%")
    out_of_bounds = print_node_counts(pipesim, framework) if "--all-nodes" in args else []
    if "--tp-across-nodes" in args:
        print_tp_across_nodes(pipesim, framework)
    if "--check" in args and out_of_bounds:
        print("FAIL: node counts beyond their bounds: " + ", ".join(out_of_bounds))
        sys.exit(1)
    if "--check" in args and (abs(step_median) > STEP_MEDIAN_BOUND_PCT or abs(memory_median) > MEMORY_MEDIAN_BOUND_PCT
                              or failed_fit > FAILED_PREDICTED_TO_FIT_MAX or abs(state_median) > STATE_MEDIAN_BOUND_PCT
                              or abs(state_max) > STATE_MAX_BOUND_PCT):
        print(f"FAIL: bounds are step median within {STEP_MEDIAN_BOUND_PCT}%, memory median within "
              f"{MEMORY_MEDIAN_BOUND_PCT}%, at most {FAILED_PREDICTED_TO_FIT_MAX} failed runs predicted to fit, "
              f"optimizer-step memory median within {STATE_MEDIAN_BOUND_PCT}% and each within "
              f"{STATE_MAX_BOUND_PCT}%")
        sys.exit(1)


if __name__ == "__main__":
    main()
