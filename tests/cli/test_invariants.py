#!/usr/bin/env python3
"""Every result is held to physical invariants before it is printed. Each test here doctors a real result
(simulate's JSON, or a timeline with its plan) so that exactly one invariant breaks, feeds it to
`pipesim check`, and expects exit code 3 with one line naming that invariant; the undoctored result passes.
Also: the RoundPipe + fill-jobs steps that were once 0.05 ms and 1.1 ms."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

PIPESIM = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else "pipesim"


def run(*args):
    p = subprocess.run([PIPESIM, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def simulate(*args):
    rc, out, err = run("simulate", "--format", "json", *args)
    assert rc == 0, err
    return json.loads(out)


class Doctored(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        cls.plan = os.path.join(d, "plan.json")
        cls.timeline = os.path.join(d, "timeline.json")
        # One iteration, 4 stages: every GPU computes and holds its weights for the whole run.
        cls.single = simulate("--model", "llama3-8b", "--hw", "h100-sxm-8x", "--schedule", "1f1b", "--pp", "4",
                              "--microbatches", "8", "--plan-out", cls.plan, "--timeline", cls.timeline)
        # Several iterations (an asynchronous schedule's steady state).
        cls.steady_plan = os.path.join(d, "steady_plan.json")
        cls.steady_timeline = os.path.join(d, "steady_timeline.json")
        cls.steady = simulate("--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--schedule", "roundpipe",
                              "--pp", "8", "--plan-out", cls.steady_plan, "--timeline", cls.steady_timeline)
        cls.fill_plan = os.path.join(d, "fill_plan.json")
        cls.fill_timeline = os.path.join(d, "fill_timeline.json")
        cls.fill = simulate("--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--schedule", "1f1b", "--pp", "4",
                            "--microbatches", "8", "--fill-jobs", "bert-large-inference",
                            "--plan-out", cls.fill_plan, "--timeline", cls.fill_timeline)
        with open(cls.timeline) as f:
            cls.single_timeline = json.load(f)
        with open(cls.steady_timeline) as f:
            cls.steady_run_timeline = json.load(f)
        with open(cls.fill_timeline) as f:
            cls.fill_run_timeline = json.load(f)
        with open(cls.fill_plan) as f:
            cls.fill_plan_json = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def check(self, result, *args):
        path = os.path.join(self.dir.name, "doctored.json")
        with open(path, "w") as f:
            json.dump(result, f)
        return run("check", path, *args)

    def assertBroken(self, invariant, result, *args):
        rc, out, err = self.check(result, *args)
        self.assertEqual(rc, 3, f"{invariant}: exit {rc}\n{out}{err}")
        self.assertEqual(out, "")
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn(f"pipesim: internal error: invariant '{invariant}' violated: ", err)

    def doctor(self, result, **changes):
        r = copy.deepcopy(result)
        for key, value in changes.items():
            r[key] = value(r) if callable(value) else value
        return r

    def test_undoctored_results_hold(self):
        for result in (self.single, self.steady, self.fill):
            rc, out, err = self.check(result)
            self.assertEqual(rc, 0, err)
            self.assertIn("holds every invariant", out)
        for timeline, plan in ((self.timeline, self.plan), (self.steady_timeline, self.steady_plan),
                               (self.fill_timeline, self.fill_plan)):
            rc, out, err = run("check", timeline, "--plan", plan)
            self.assertEqual(rc, 0, err)
            self.assertIn("op times and memory", out)

    def test_finite(self):
        self.assertBroken("finite", self.doctor(self.single, step_time_s=None))
        self.assertBroken("finite", self.doctor(self.single, tokens_per_s=-1.0))
        self.assertBroken("finite", self.doctor(self.single, bubble_fraction=-0.1))

    def test_step_positive(self):
        self.assertBroken("step-positive", self.doctor(self.single, step_time_s=0.0))

    def test_mfu_le_hfu(self):
        self.assertBroken("mfu-le-hfu", self.doctor(self.single, mfu=lambda r: r["hfu"] + 0.01))

    def test_hfu_le_1(self):
        # What RoundPipe with fill jobs once printed: an MFU of 441.
        self.assertBroken("hfu-le-1", self.doctor(self.single, mfu=441.0, hfu=441.0))

    def test_bubble_in_range(self):
        self.assertBroken("bubble-in-range", self.doctor(self.single, bubble_fraction=1.5))

    def test_bubble_parts_sum(self):
        def more_warmup(r):
            return dict(r["bubble_breakdown"], warmup=r["bubble_breakdown"]["warmup"] + 0.05)
        self.assertBroken("bubble-parts-sum", self.doctor(self.single, bubble_breakdown=more_warmup))

    def test_time_shares_sum_to_1(self):
        def more_kernels(r):
            return dict(r["time_breakdown"], kernels=r["time_breakdown"]["kernels"] + 0.2)
        self.assertBroken("time-shares-sum-to-1", self.doctor(self.single, time_breakdown=more_kernels))

    def test_tokens_per_step(self):
        self.assertBroken("tokens-per-step", self.doctor(self.single, tokens_per_s=lambda r: 2 * r["tokens_per_s"]))

    def test_steps_within_run(self):
        self.assertBroken("steps-within-run",
                          self.doctor(self.single, first_step_time_s=lambda r: 2 * r["run_time_s"]))

    def test_gpu_time_adds_up(self):
        def longer_intra(r):
            gpus = copy.deepcopy(r["per_gpu"])
            gpus[0]["intra_s"] += 0.01
            return gpus
        self.assertBroken("gpu-time-adds-up", self.doctor(self.single, per_gpu=longer_intra))

    def test_run_covers_busiest_gpu(self):
        def overbusy(r):  # still adds up to the run, with a negative idle time
            gpus = copy.deepcopy(r["per_gpu"])
            gpus[0]["intra_s"] -= r["run_time_s"]
            gpus[0]["busy_s"] += r["run_time_s"]
            return gpus
        self.assertBroken("run-covers-busiest-gpu", self.doctor(self.single, per_gpu=overbusy))

    def test_step_covers_gpu_work(self):
        # A steady-state step a fifth as long, with its throughput to match: every other invariant holds.
        self.assertGreater(self.steady["iterations"], 1)

        def shorter_step(t):
            m = t["metrics"]
            m["step_time_s"] /= 5
            m["steady_state_step_time_s"] /= 5
            for key in ("tokens_per_s", "mfu", "hfu", "tflops_per_gpu"):
                m[key] *= 5
            self.assertLess(m["hfu"], 1)
        t, plan = self.timeline_with(shorter_step, self.steady_run_timeline, self.steady_plan)
        self.assertBroken("step-covers-gpu-work", t, "--plan", plan)

    def timeline_with(self, change, timeline=None, plan=None):
        t = copy.deepcopy(timeline or self.single_timeline)
        change(t)
        return t, plan or self.plan

    def test_op_times(self):
        def backwards(t):
            op = t["ops"][-1]
            op["end_ns"] = op["start_ns"] - 1
        t, plan = self.timeline_with(backwards)
        self.assertBroken("op-times", t, "--plan", plan)

    def test_step_covers_critical_path(self):
        def early(t):  # the last op (the last stage's optimizer) starts with the run
            t["ops"][-1]["start_ns"] = 0
        t, plan = self.timeline_with(early)
        self.assertBroken("step-covers-critical-path", t, "--plan", plan)

    def test_peak_memory_covers_resident(self):
        def no_memory(t):
            t["metrics"]["per_gpu"][0]["peak_mem_bytes"] = 0
        t, plan = self.timeline_with(no_memory)
        self.assertBroken("peak-memory-covers-resident", t, "--plan", plan)

    def test_oom_reported(self):
        def over(t):
            t["metrics"]["per_gpu"][0]["peak_mem_bytes"] = t["metrics"]["gpu_mem_capacity_bytes"] + 1
        t, plan = self.timeline_with(over)
        self.assertBroken("oom-reported", t, "--plan", plan)

    def test_fill_in_bubbles(self):
        ops = self.fill_plan_json["ops"]
        streams = self.fill_plan_json["streams"]
        fill = next(i for i, op in enumerate(ops) if op["kind"] == "fill")
        device = streams[ops[fill]["stream"]]["device"]
        compute = {i for i, s in enumerate(streams) if s["kind"] == "compute" and s["device"] == device}

        def beside_compute(t):  # the chunk ends where the next compute op on its GPU ends
            start = t["ops"][fill]["start_ns"]
            later = [o for i, o in enumerate(t["ops"]) if ops[i]["stream"] in compute and o["start_ns"] >= start
                     and o["end_ns"] > o["start_ns"]]
            t["ops"][fill]["end_ns"] = min(o["end_ns"] for o in later)
        t, plan = self.timeline_with(beside_compute, self.fill_run_timeline, self.fill_plan)
        self.assertBroken("fill-in-bubbles", t, "--plan", plan)

    def fill_doctor(self, **changes):
        r = copy.deepcopy(self.fill)
        r["fill"].update(changes)
        return r

    def test_fill_slowdown_within_limit(self):
        self.assertBroken("fill-slowdown-within-limit",
                          self.fill_doctor(main_slowdown=self.fill["fill"]["main_slowdown_limit"] + 0.01))

    def test_fill_utilization(self):
        self.assertBroken("fill-utilization", self.fill_doctor(utilization_with_fill=1.2))
        self.assertBroken("fill-utilization", self.fill_doctor(fill_gpu_equivalents=self.fill["num_gpus"] + 1.0))

    def test_fill_units(self):
        jobs = copy.deepcopy(self.fill["fill"]["jobs"])
        jobs[0]["units_done"] = jobs[0]["units"] + 1
        self.assertBroken("fill-units", self.fill_doctor(jobs=jobs))
        jobs = copy.deepcopy(self.fill["fill"]["jobs"])
        jobs[0]["completed_s"] = self.fill["run_time_s"] * 2
        self.assertBroken("fill-units", self.fill_doctor(jobs=jobs))

    def test_a_timeline_of_another_plan_is_bad_input(self):
        rc, out, err = run("check", self.fill_timeline, "--plan", self.plan)
        self.assertEqual(rc, 2, err)
        self.assertIn("not a timeline of this plan", err)


class RoundPipeWithFill(unittest.TestCase):
    def test_fill_jobs_leave_the_step_within_10_percent(self):
        # Once 0.05 ms and 1.1 ms (an MFU of 441): a fill chunk in a GPU's last bubble counted as the end of
        # an early iteration.
        for model, hw, pp in (("qwen3-1.7b", "h100-sxm-8x", "32"), ("llama3-8b", "l40s-8x", "64")):
            args = ("--model", model, "--hw", hw, "--schedule", "roundpipe", "--pp", pp)
            without = simulate(*args)
            filled = simulate(*args, "--fill-jobs", "bert-large-inference")
            ratio = filled["step_time_s"] / without["step_time_s"]
            self.assertGreaterEqual(ratio, 1.0, model)
            self.assertLessEqual(ratio, 1.10, model)
            self.assertLess(filled["mfu"], 1)
            self.assertGreater(filled["fill"]["fill_gpu_equivalents"], 0)


if __name__ == "__main__":
    unittest.main()
