#!/usr/bin/env python3
"""Differential tests over generated jobs, through the command line: for each seeded job, the command line
and the Python module print the same JSON, and `--plan-out` then `--plan` writes the same plan and the same
timeline byte for byte. A job its schedule refuses must be refused the same way by both (exit code 2 and its
message). A failure prints the seed and the command that reproduces it.

    PYTHONPATH=<build>/python PIPESIM_BIN=<pipesim> cli_and_module.py [--jobs N] [--seed S] [--max-pp P]
"""
import argparse
import filecmp
import json
import os
import random
import subprocess
import sys
import tempfile

import pipesim

PIPESIM = os.environ["PIPESIM_BIN"]
MODELS = ["qwen3-1.7b", "qwen3-1.7b", "llama3-8b", "llama2-7b", "qwen3-8b", "bert-large"]
HWS = ["h100-sxm-8x", "a100-80g-sxm-8x", "rtx4090-8x", "l40s-8x", "mi300x-8x", "b200-sxm-8x", "rtx3090-4x",
       "v100-sxm2-4x"]


def generate(rng, schedules, max_pp):
    """A job; `schedules` maps each schedule's name to its kind (whole-plan or order-based)."""
    name = rng.choice(sorted(schedules))
    job = dict(schedule=name, model=rng.choice(MODELS), hw=rng.choice(HWS),
               pp=min(max_pp, rng.choice([1, 2, 2, 4, 4, 8, 8, 16, 32, 64])), tp=rng.choice([1, 1, 1, 2, 4]),
               dp=rng.choice([1, 1, 2, 4]), seq=rng.choice([512, 1024, 2048, 4096]),
               recompute=rng.choice(["none", "none", "full", "selective"]))
    job["microbatches"] = rng.randint(1, 3 * job["pp"] + 1)
    if job["dp"] > 1 and rng.random() < 0.5:
        job["zero"] = rng.choice([1, 2, 3])
    # Mostly what each schedule accepts, so that most jobs run (as tests/property/generated_jobs.cpp draws them).
    if schedules[name] == "whole-plan":
        job.update(tp=1, dp=1, microbatches=rng.randint(job["pp"], 3 * job["pp"] + 1))
        job.pop("zero", None)
    elif "interleaved" in name:
        job["microbatches"] = job["pp"] * rng.randint(1, 3)
    if rng.random() < 0.5:
        job["fill_jobs"] = "bert-large-inference"
    return job


def arguments(job):
    args = []
    for key, value in job.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    return args


def cli(*args):
    p = subprocess.run([PIPESIM, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def without_wall_time(result):
    return {k: v for k, v in result.items() if k != "sim_wall_s"}


def check(job, d):
    """None when the command line, the module and a saved plan agree; else what differs."""
    plan, timeline = os.path.join(d, "plan.json"), os.path.join(d, "timeline.json")
    code, out, err = cli("simulate", *arguments(job), "--format", "json", "--plan-out", plan, "--timeline", timeline)
    try:
        from_module = pipesim.simulate(**job)
    except ValueError as e:
        if code == 2 and str(e) == err.strip():
            return None  # refused alike
        return f"the command line exits {code} ({err.strip()}), the module raises: {e}"
    if code != 0:
        return f"the command line exits {code}: {err.strip()}; the module answers"
    if without_wall_time(json.loads(out)) != without_wall_time(from_module):
        return "the command line and the module print different JSON"
    again_plan, again_timeline = os.path.join(d, "again.json"), os.path.join(d, "again_timeline.json")
    code, _, err = cli("simulate", "--plan", plan, "--plan-out", again_plan, "--timeline", again_timeline)
    if code != 0:
        return f"--plan of its own --plan-out exits {code}: {err.strip()}"
    # With fill jobs the saved plan holds the chunks: run again, the fill stays as it was placed.
    if not filecmp.cmp(plan, again_plan, shallow=False):
        return "--plan-out of a --plan run writes a different plan"
    if "fill_jobs" not in job and not filecmp.cmp(timeline, again_timeline, shallow=False):
        return "--plan of its own --plan-out simulates to a different timeline"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-pp", type=int, default=64,
                        help="smaller jobs (a sanitizer build reads a saved plan of 100,000 ops for minutes)")
    o = parser.parse_args()
    schedules = {s["name"]: s["kind"] for s in pipesim.schedules()}
    answered = refused = 0
    with tempfile.TemporaryDirectory() as d:
        for k in range(o.jobs):
            seed = o.seed + k
            job = generate(random.Random(seed), schedules, o.max_pp)
            problem = check(job, d)
            if problem:
                print(f"FAILED: seed {seed} (rerun: --seed {seed} --jobs 1): pipesim simulate "
                      f"{' '.join(arguments(job))}\n  {problem}", file=sys.stderr)
                return 1
            if os.path.exists(os.path.join(d, "plan.json")):
                answered += 1
                os.remove(os.path.join(d, "plan.json"))
            else:
                refused += 1
    print(f"{o.jobs} generated jobs from seed {o.seed} through the command line and the module: {answered} "
          f"answered alike, {refused} refused alike; saved plans rerun byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
