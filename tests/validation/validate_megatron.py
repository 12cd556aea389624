#!/usr/bin/env python3
"""Predicts every measured run of Narayanan et al. 2021 (Megatron-LM on DGX A100, tables 1 and 2) with the
shipped a100-80g-sxm-8x profile and prints published vs predicted iteration time; then the same for Korthikanti
et al. 2022.

Usage: validate_megatron.py PIPESIM [--check | --replan]
With --check it exits 1 when a row's error or the mean absolute error exceeds the bounds below (the goal: 5 %
per row and 3 % on average).

Table 1 rows run as the authors launched them (Megatron-LM's examples/sc21 scripts: microbatch size, interleaved
or not, PyTorch or Megatron-LM's local DDP). Table 2 rows list no launch settings: `pipesim plan` chooses the
microbatch size and 1F1B or interleaved 1F1B within the published tp and pp, as the authors tuned them. What the
paper's system did is given, not chosen: full activation recomputation, dropout, no sequence parallelism
(introduced in 2022), attention without flash kernels, blocking pipeline send/recv; local DDP all-reduces the
gradients after the backward and adds each microbatch's 16-bit gradients into fp32 main gradients, PyTorch DDP
overlaps the all-reduce with the backward and accumulates in the 16-bit .grad.

Then Table 5 of Korthikanti et al. 2022 (megatron_korthikanti2022.json: Megatron-LM a year later, 22B to 1T, no
data parallelism), each model with full recomputation and with sequence parallelism + selective recomputation,
as the paper ran them; its bounds are the goal's.

The planner's choices are kept in megatron_choices.json (regenerate them with --replan after a modelling
change, about five minutes); the check simulates those configurations, which takes seconds.
"""
import json
import os
import subprocess
import sys
import tempfile

# Every row within the goal's 5 % (the worst, 174.6B on 384 GPUs, 4.7 % pessimistic).
ROW_BOUND_PCT = 5.0
MEAN_BOUND_PCT = 3.0
# Korthikanti et al. 2022 (Megatron-LM a year later, no data parallelism): every row within the goal.
ROW_BOUND_2022_PCT = 5.0
MEAN_BOUND_2022_PCT = 3.0

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, VOCAB = 2048, 51200


def paper_flops(batch, layers, hidden):
    """Eq. 3 of the paper: FLOPs per iteration with activation recomputation."""
    return 96 * batch * SEQ * layers * hidden**2 * (1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


def rows(data):
    """Table 1 rows, then Table 2 rows with the model of the same size from Table 1 (174.6B is GPT-3 class)."""
    table1 = data["table1_weak_scaling"]
    for r in table1:
        yield dict(r, table=1)
    shapes = {174.6: dict(heads=96, hidden=12288, layers=96), 529.6: None}
    for r in data["table2_ptdp"]:
        shape = shapes[r["params_b"]] or next(
            {k: t[k] for k in ("heads", "hidden", "layers")} for t in table1 if t["params_b"] == r["params_b"])
        tp = 8
        yield dict(r, **shape, tp=tp, pp=r["model_parallel_size"] // tp, table=2)


def model_file(tmp, r):
    path = os.path.join(tmp, f"gpt-{r['params_b']}b.json")
    with open(path, "w") as f:
        json.dump({"format": "pipesim-model", "version": 1, "name": f"gpt-{r['params_b']}b",
                   "source": "Narayanan et al. 2021, Table 1", "hidden_size": r["hidden"],
                   "num_layers": r["layers"], "num_heads": r["heads"], "num_kv_heads": r["heads"],
                   "ffn_hidden_size": 4 * r["hidden"], "vocab_size": VOCAB, "tie_embeddings": True,
                   "mlp": "gelu", "linear_biases": ["qkv", "out", "mlp"]}, f)
    return path


# How Megatron-LM ran in 2021 (see the module docstring and frameworks/megatron-lm-2021.json: its local DDP by
# default), in fp16 mixed precision. Rows run with PyTorch DDP override its gradient sync and accumulation.
FRAMEWORK = ["--framework", "megatron-lm-2021", "--dtype", "fp16"]
DDP = {"local": [],
       "torch": ["--grad-sync", "overlap", "--grad-accumulation", "autograd"]}


def framework(r):
    return FRAMEWORK + DDP[r.get("run", {}).get("ddp", "local")]


def row_key(r):
    return f"table{r['table']}-{r['params_b']}b-{r['gpus']}gpus"


def plan(pipesim, tmp, r):
    """The planner's best configuration within the row's tp and pp (and microbatch size where given)."""
    cmd = [pipesim, "plan", "--model", model_file(tmp, r), "--hw", "a100-80g-sxm-8x", "--gpus", str(r["gpus"]),
           "--global-batch", str(r["batch"]), "--seq", str(SEQ), "--tp", str(r["tp"]), "--pp", str(r["pp"]),
           "--recompute", "full", "--schedules", "1f1b,interleaved-1f1b", "--data-parallel", "ddp", "--top", "1",
           "--format", "json"]
    if "microbatch" in r:
        cmd += ["--microbatch-size", str(r["microbatch"])]
    out = subprocess.run(cmd + framework(r), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"pipesim plan failed on {row_key(r)}: {out.stderr.strip()}")
    best = json.loads(out.stdout)[0]
    c = best["config"]
    return {"schedule": best["schedule"], "microbatch_size": c["microbatch_size"],
            "virtual_stages": c["virtual_stages"], "partition": c["partition"]}


def published_run(r):
    """The authors' launch settings of a Table 1 row, uniform layers per (virtual) stage."""
    run = r["run"]
    chunks = r["pp"] * run["virtual_stages"]
    partition = ",".join([str(r["layers"] // chunks)] * chunks)
    return {"schedule": run["schedule"], "microbatch_size": run["microbatch_size"],
            "virtual_stages": run["virtual_stages"], "partition": partition}


def simulate(pipesim, tmp, r, choice, options):
    dp = r["gpus"] // (r["tp"] * r["pp"])
    cmd = [pipesim, "simulate", "--model", model_file(tmp, r), "--hw", "a100-80g-sxm-8x", "--tp", str(r["tp"]),
           "--pp", str(r["pp"]), "--dp", str(dp), "--global-batch", str(r["batch"]),
           "--microbatch-size", str(choice["microbatch_size"]), "--seq", str(SEQ),
           "--schedule", choice["schedule"], "--virtual-stages", str(choice["virtual_stages"]),
           "--partition", choice["partition"], "--format", "json"]
    out = subprocess.run(cmd + options, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"pipesim simulate failed on {row_key(r)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


# Megatron-LM in 2022 (frameworks/megatron-lm-2022.json: the same kernels, with the
# weight-gradient GEMMs accumulating into the fp32 main gradients and the persistent layer norm), in fp16 mixed
# precision; the paper's two configurations of each model, as launched (sequence parallelism is a launch flag).
FRAMEWORK_2022 = ["--framework", "megatron-lm-2022", "--dtype", "fp16"]
CONFIGS_2022 = {"full_recompute_s": ("full recompute", ["--recompute", "full"]),
                "present_work_s": ("selective + SP", ["--recompute", "selective", "--sequence-parallel"])}


def validate_2022(pipesim, tmp):
    """Table 5 of Korthikanti et al. 2022: every model under both configurations; returns the errors in %."""
    with open(os.path.join(HERE, "megatron_korthikanti2022.json")) as f:
        data = json.load(f)
    errors = []
    print("| model | GPUs | tp/pp | batch | configuration | published s | pipesim s | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in data["rows"]:
        chunks = r["pp"] * r["virtual_stages"]
        choice = dict(r, partition=",".join([str(r["layers"] // chunks)] * chunks))
        for key, (name, options) in CONFIGS_2022.items():
            predicted = simulate(pipesim, tmp, r, choice, options + FRAMEWORK_2022)["step_time_s"]
            err = 100 * (predicted - r[key]) / r[key]
            errors.append(err)
            print(f"| {r['params_b']}B | {r['gpus']} | {r['tp']}/{r['pp']} | {r['batch']} | {name} | {r[key]:.2f} | "
                  f"{predicted:.2f} | {err:+.1f}% |")
    return errors


def summary(errors):
    mean = sum(abs(e) for e in errors) / len(errors)
    worst = max(abs(e) for e in errors)
    print(f"\nmean absolute error {mean:.1f}%, worst {worst:.1f}% over {len(errors)} rows "
          f"(negative: pipesim predicts a faster step than measured)")
    return mean, worst


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim, check, replan = sys.argv[1], "--check" in sys.argv[2:], "--replan" in sys.argv[2:]
    with open(os.path.join(HERE, "megatron_narayanan2021.json")) as f:
        data = json.load(f)
    choices_path = os.path.join(HERE, "megatron_choices.json")
    choices = {}
    if not replan:
        with open(choices_path) as f:
            choices = json.load(f)
    errors = []
    print("| table | model | GPUs | tp/pp/dp | batch | published s | pipesim s | config | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows(data):
            published = paper_flops(r["batch"], r["layers"], r["hidden"]) / (r["gpus"] * r["tflops_per_gpu"] * 1e12)
            if "run" in r:
                c = published_run(r)
            else:
                if replan:
                    choices[row_key(r)] = plan(pipesim, tmp, r)
                c = choices[row_key(r)]
            predicted = simulate(pipesim, tmp, r, c, ["--recompute", "full"] + framework(r))["step_time_s"]
            err = 100 * (predicted - published) / published
            errors.append(err)
            dp = r["gpus"] // (r["tp"] * r["pp"])
            print(f"| {r['table']} | {r['params_b']}B | {r['gpus']} | {r['tp']}/{r['pp']}/{dp} | {r['batch']} | "
                  f"{published:.2f} | {predicted:.2f} | {c['schedule']} b{c['microbatch_size']} "
                  f"v{c['virtual_stages']} {'published' if 'run' in r else 'planned'} | {err:+.1f}% |")
    if replan:
        tmp_path = choices_path + ".tmp"
        with open(tmp_path, "w") as f:
            json.dump(choices, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp_path, choices_path)
    mean, worst = summary(errors)
    print()
    with tempfile.TemporaryDirectory() as tmp:
        mean_2022, worst_2022 = summary(validate_2022(pipesim, tmp))
    if check and (worst > ROW_BOUND_PCT or mean > MEAN_BOUND_PCT):
        print(f"FAIL: Narayanan 2021 bounds are {ROW_BOUND_PCT}% per row and {MEAN_BOUND_PCT}% on average")
        return 1
    if check and (worst_2022 > ROW_BOUND_2022_PCT or mean_2022 > MEAN_BOUND_2022_PCT):
        print(f"FAIL: Korthikanti 2022 bounds are {ROW_BOUND_2022_PCT}% per row and {MEAN_BOUND_2022_PCT}% on average")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
