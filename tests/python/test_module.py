#!/usr/bin/env python3
"""The Python module against the command line: same inputs give the same JSON, errors are ValueError with
the command line's message, timelines round-trip, plots draw what the run holds, and a sweep gives the same
table locally and on a Dask LocalCluster. Run with PYTHONPATH=<build>/python and PIPESIM_BIN=<pipesim>."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import pipesim
import pipesim.plot

PIPESIM = os.environ["PIPESIM_BIN"]
JOB = dict(model="llama3-8b", hw="rtx4090-8x", pp=4, schedule="1f1b", global_batch=8)
JOB_ARGS = ["--model", "llama3-8b", "--hw", "rtx4090-8x", "--pp", "4", "--schedule", "1f1b",
            "--global-batch", "8"]


def cli(*args):
    p = subprocess.run([PIPESIM, *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def without_wall_time(result):
    """The simulation's own wall-clock time is the one field that differs between two runs."""
    if isinstance(result, list):
        return [without_wall_time(r) for r in result]
    return {k: v for k, v in result.items() if k != "sim_wall_s"}


class SameAsTheCommandLine(unittest.TestCase):
    def test_simulate_defaults_equal_the_cli(self):
        self.assertEqual(without_wall_time(pipesim.simulate()), without_wall_time(cli_json("simulate")))

    def test_simulate_with_options(self):
        self.assertEqual(without_wall_time(pipesim.simulate(**JOB, recompute="full", dropout=True)),
                         without_wall_time(cli_json("simulate", *JOB_ARGS, "--recompute", "full", "--dropout")))

    def test_framework(self):
        result = pipesim.simulate(**JOB, framework="megatron-lm-2022", attention="flash")
        self.assertEqual(result["framework"], "megatron-lm-2022")
        self.assertEqual(without_wall_time(result),
                         without_wall_time(cli_json("simulate", *JOB_ARGS, "--framework", "megatron-lm-2022",
                                                    "--attention", "flash")))

    def test_scale_mechanisms(self):
        # NCCL's collective latency and stragglers, switched from Python as from the command line.
        kw = dict(JOB, pp=1, tp=8, hw="h100-sxm-8x", nodes=2, dp=2)
        args = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "1", "--schedule", "1f1b",
                "--global-batch", "8", "--tp", "8", "--nodes", "2", "--dp", "2"]
        for extra, flags in ((dict(collective_latency="none"), ["--collective-latency", "none"]),
                             (dict(gpu_speed_cv=0.02), ["--gpu-speed-cv", "0.02"])):
            self.assertEqual(without_wall_time(pipesim.simulate(**kw, **extra)),
                             without_wall_time(cli_json("simulate", *args, *flags)))
        base = pipesim.simulate(**kw)["step_time_s"]
        self.assertLess(pipesim.simulate(**kw, collective_latency="none")["step_time_s"], base)
        self.assertGreater(pipesim.simulate(**kw, gpu_speed_cv=0.02)["step_time_s"], base)

    def test_power_limit(self):
        # GPUs held to 500 W: the same answer as the command line's, slower, MFU still against the rated peak;
        # a limit the profile cannot price is a ValueError with the command line's message.
        kw = dict(JOB, pp=1, hw="h100-sxm-8x", dp=8)
        args = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "1", "--schedule", "1f1b",
                "--global-batch", "8", "--dp", "8", "--power-limit", "500"]
        limited = pipesim.simulate(**kw, power_limit=500)
        self.assertEqual(without_wall_time(limited), without_wall_time(cli_json("simulate", *args)))
        rated = pipesim.simulate(**kw)
        self.assertGreater(limited["step_time_s"], rated["step_time_s"])
        # Only GEMMs and attention slow, by 0.904 of their clock at most.
        self.assertLess(limited["step_time_s"], rated["step_time_s"] / (500 / 700) ** (1 / 3.32))
        with self.assertRaisesRegex(ValueError, "power_clock_exponent"):
            pipesim.simulate(**dict(kw, hw="a100-80g-sxm-8x"), power_limit=300)

    def test_attention_kernel(self):
        # Another attention kernel, as a what-if: the same answer as the command line's; cuDNN's published H100
        # rate (the framework's) lies between FlashAttention-2's and the GEMM curve's; a kernel the profile has
        # no rate for is a ValueError naming the valid ones.
        kw = dict(JOB, pp=1, hw="h100-sxm-8x", dp=8, seq=8192)
        args = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "1", "--schedule", "1f1b",
                "--global-batch", "8", "--dp", "8", "--seq", "8192", "--attention-kernel", "flash-attn-2"]
        flash = pipesim.simulate(**kw, attention_kernel="flash-attn-2")
        self.assertEqual(without_wall_time(flash), without_wall_time(cli_json("simulate", *args)))
        cudnn = pipesim.simulate(**kw)
        gemm = pipesim.simulate(**kw, attention_kernel="gemm")
        self.assertLess(gemm["step_time_s"], cudnn["step_time_s"])
        self.assertLess(cudnn["step_time_s"], flash["step_time_s"])
        with self.assertRaisesRegex(ValueError, "valid: gemm, cudnn, flash-attn-2"):
            pipesim.simulate(**kw, attention_kernel="flash-attn-3")

    def test_collectives(self):
        # One collective alone, as nccl-tests reports it: the same table as the command line's, bus bandwidth
        # rising with the message size.
        result = pipesim.collectives(hw="rtx4090-8x", min_bytes="1M", max_bytes="64M", step_factor=4)
        self.assertEqual(result, cli_json("collectives", "--hw", "rtx4090-8x", "--min-bytes", "1M",
                                          "--max-bytes", "64M", "--step-factor", "4"))
        sizes = result["sizes"]
        self.assertEqual([s["bytes"] for s in sizes], [1 << 20, 4 << 20, 16 << 20, 64 << 20])
        self.assertTrue(all(a["busbw_GBps"] < b["busbw_GBps"] for a, b in zip(sizes, sizes[1:])))

    def test_import_trace_with_its_execution_trace(self):
        # The report and the workload are the command line's; the execution trace adds each layer's memory.
        traces = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation", "traces")
        kineto, et = (os.path.join(traces, "gpt2." + k + ".json.gz") for k in ("kineto", "et"))
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
            report = pipesim.import_trace(kineto, et=et, out=a, tied_embeddings=True)
            self.assertEqual(report, cli_json("import-trace", kineto, "--et", et, "--out", b, "--tied-embeddings"))
            with open(a) as fa, open(b) as fb:
                self.assertEqual(fa.read(), fb.read())
        blocks = [layer for layer in report["layers"] if layer["role"] == "block"]
        self.assertEqual(len(blocks), 12)
        self.assertTrue(all(layer["saved_bytes"] > 0 for layer in blocks))
        self.assertGreater(report["step_grad_bytes"], 0)
        self.assertEqual(report["memory_source"], "execution trace")
        # The GPU's waits for the CPU, the profiler's own cost taken out: fewer with more of it taken out.
        self.assertGreater(report["host_wait_ms"], 0)
        with tempfile.TemporaryDirectory() as tmp:
            dearer = pipesim.import_trace(kineto, out=os.path.join(tmp, "c.json"), profiler_op_us=8)
        self.assertLess(dearer["host_wait_ms"], report["host_wait_ms"])
        # all_steps=True is --all-steps: the mean of the steps a trace marks.
        two = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "trace_import",
                           "two-profiler-steps.json")
        with tempfile.TemporaryDirectory() as tmp:
            mean = pipesim.import_trace(two, out=os.path.join(tmp, "m.json"), all_steps=True)
        self.assertEqual((mean["averaged_steps"], mean["step"]), (2, "ProfilerStep#1 to ProfilerStep#2"))

    def test_lists_and_false_flags(self):
        # A list is joined with commas; False on a flag with a --no- form gives that form.
        kw = dict(JOB, pp=2, partition=[16, 16], sequence_parallel=False, tp=2)
        args = ["--model", "llama3-8b", "--hw", "rtx4090-8x", "--pp", "2", "--schedule", "1f1b",
                "--global-batch", "8", "--partition", "16,16", "--no-sequence-parallel", "--tp", "2"]
        self.assertEqual(without_wall_time(pipesim.simulate(**kw)), without_wall_time(cli_json("simulate", *args)))

    def test_all_schedules_is_a_list(self):
        results = pipesim.simulate(**dict(JOB, schedule="all"))
        self.assertIsInstance(results, list)
        self.assertEqual(without_wall_time(results),
                         without_wall_time(cli_json("simulate", *JOB_ARGS[:-4], "--global-batch", "8",
                                                    "--schedule", "all")))

    def test_plan(self):
        kw = dict(model="llama3-8b", hw="rtx4090-8x", gpus=8, global_batch=16, schedules="1f1b,gpipe", top=3)
        args = ["--model", "llama3-8b", "--hw", "rtx4090-8x", "--gpus", "8", "--global-batch", "16",
                "--schedules", "1f1b,gpipe", "--top", "3"]
        ranked = pipesim.plan(**kw)
        self.assertEqual(ranked, cli_json("plan", *args))
        self.assertEqual(len(ranked), 3)

    def test_buy(self):
        kw = dict(model="qwen3-1.7b", hw="h100-sxm-8x,l40s-8x", gpus=[8, 16], tokens=1e10, global_batch=32,
                  schedules="1f1b", recompute="none")
        args = ["--model", "qwen3-1.7b", "--hw", "h100-sxm-8x,l40s-8x", "--gpus", "8,16", "--tokens", "1e10",
                "--global-batch", "32", "--schedules", "1f1b", "--recompute", "none"]
        quote = pipesim.buy(**kw)
        self.assertEqual(quote, cli_json("buy", *args))
        self.assertEqual(len(quote["clusters"]), 4)

    def test_partition_and_bubbles(self):
        eight = dict(JOB, pp=8)
        self.assertEqual(pipesim.partition(**eight), cli_json("partition", *JOB_ARGS[:5], "8", *JOB_ARGS[6:]))
        self.assertEqual(pipesim.bubbles(**JOB), cli_json("bubbles", *JOB_ARGS))

    def test_listings(self):
        self.assertEqual(pipesim.hw_profiles(), cli_json("hw"))
        self.assertEqual(pipesim.models(), cli_json("models"))
        self.assertEqual(pipesim.schedules(), cli_json("schedules"))
        self.assertEqual(pipesim.fill_jobs(), cli_json("fill-jobs"))
        self.assertEqual(pipesim.frameworks(), cli_json("frameworks"))
        self.assertIn("llama3-8b", [m["name"] for m in pipesim.models()])
        self.assertIn("zb-h1", [s["name"] for s in pipesim.schedules()])

    def test_explain_a_saved_plan(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            pipesim.simulate(**JOB, plan_out=path)
            self.assertEqual(pipesim.explain(path, top=3), cli_json("explain", path, "--top", "3"))
            self.assertEqual(pipesim.load_plan(path)["format"], "pipesim-plan")
            self.assertEqual(without_wall_time(pipesim.simulate(plan=path)),
                             without_wall_time(cli_json("simulate", "--plan", path)))

    def test_replay_compare_calibrate(self):
        with tempfile.TemporaryDirectory() as tmp:
            plan, predicted, measured = (os.path.join(tmp, n) for n in ("p.json", "pred.json", "meas.json"))
            tiny = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tiny_model.json")
            pipesim.simulate(model=tiny, pp=2, schedule="1f1b", microbatches=4, seq=128, plan_out=plan,
                             timeline=predicted)
            # A timeline against itself: deterministic, so the module and the command must agree exactly.
            self.assertEqual(pipesim.compare(predicted, predicted, top=2),
                             cli_json("compare", predicted, predicted, "--top", "2"))
            self.assertEqual(pipesim.compare(predicted, predicted)["step_time_error"], 0)
            r = pipesim.replay(plan, iterations=1, work_scale=0.1, out=measured)
            self.assertGreater(r["measured_step_time_s"], 0)
            self.assertEqual(len(pipesim.load_timeline(measured)["op"]), len(pipesim.load_plan(plan)["ops"]))
            host = pipesim.calibrate(replay_host=True, out=os.path.join(tmp, "host.json"))
            self.assertEqual(host["format"], "pipesim-hw")
            self.assertIn("host.json", host["report"])

    def test_run_returns_what_the_cli_prints(self):
        self.assertEqual(pipesim.run("hw"), cli("hw"))
        code, out, err = pipesim.run("simulate", "--pp", "0")
        self.assertEqual((code, out, err), cli("simulate", "--pp", "0"))
        self.assertEqual(code, 2)


class Errors(unittest.TestCase):
    def test_bad_input_is_a_value_error_with_the_cli_message(self):
        _, _, err = cli("simulate", "--model", "no-such-model")
        with self.assertRaises(ValueError) as e:
            pipesim.simulate(model="no-such-model")
        self.assertEqual(str(e.exception), err.strip())
        self.assertEqual(len(str(e.exception).splitlines()), 1)

    def test_out_of_range_number(self):
        with self.assertRaises(ValueError) as e:
            pipesim.simulate(**dict(JOB, pp=-3))
        self.assertIn("--pp", str(e.exception))

    def test_missing_file(self):
        with self.assertRaises(ValueError) as e:
            pipesim.explain("/nonexistent/plan.json")
        self.assertIn("/nonexistent/plan.json", str(e.exception))
        with self.assertRaises(OSError):
            pipesim.load_plan("/nonexistent/plan.json")

    def test_unknown_keyword_names_the_valid_ones(self):
        with self.assertRaises(TypeError) as e:
            pipesim.simulate(modle="llama3-8b")
        self.assertIn("'modle'", str(e.exception))
        self.assertIn("model", str(e.exception))
        with self.assertRaises(TypeError):
            pipesim.simulate(dropout="yes")  # a flag takes True or False


class Timelines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tl = pipesim.timeline(**JOB)

    def test_columns_cover_every_op(self):
        tl = self.tl
        n = len(tl["op"])
        self.assertEqual(n, tl.metrics["ops"])
        for column in tl.values():
            self.assertEqual(len(column), n)
        self.assertTrue(np.all(tl["end_s"] >= tl["start_s"]))
        self.assertAlmostEqual(float(tl["end_s"].max()), tl.metrics["run_time_s"], places=9)
        self.assertEqual(tl.metrics["step_time_s"], pipesim.simulate(**JOB)["step_time_s"])

    def test_round_trip_through_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            t, p = os.path.join(tmp, "t.json"), os.path.join(tmp, "p.json")
            code, _, err = cli("simulate", *JOB_ARGS, "--timeline", t, "--plan-out", p)
            self.assertEqual(code, 0, err)
            loaded = pipesim.load_timeline(t, p)
            self.assertEqual(sorted(loaded), sorted(self.tl))
            for key in self.tl:
                np.testing.assert_array_equal(loaded[key], self.tl[key])
            bare = pipesim.load_timeline(t)  # without the plan: the timeline's own columns
            self.assertEqual(sorted(bare), ["end_s", "kind", "op", "start_s", "stream"])

    def test_dataframe_takes_it_directly(self):
        import pandas as pd

        df = pd.DataFrame(self.tl)
        self.assertEqual(len(df), len(self.tl["op"]))
        # 1F1B with 2 microbatches per... every microbatch has one forward per stage.
        fwd = df[df.kind == "forward"]
        self.assertEqual(len(fwd), 4 * 8)
        self.assertEqual(sorted(fwd.stage.unique().tolist()), [0, 1, 2, 3])

    def test_memory_curve_peaks_at_the_reported_peak(self):
        for gpu in self.tl.metrics["per_gpu"]:
            d = list(self.tl.devices["name"]).index(gpu["device"])
            _, used = pipesim.plot.memory_curve(self.tl, d)
            self.assertEqual(int(used.max()), gpu["peak_mem_bytes"])

    def test_plots_draw_the_run(self):
        import matplotlib

        matplotlib.use("Agg")
        fig = pipesim.plot.gantt(self.tl)
        ax = fig.axes[0]
        self.assertEqual(len(ax.get_yticks()), len(set(self.tl["stream"].tolist())))
        bars = sum(len(c.patches) for c in ax.containers)
        self.assertEqual(bars, len(self.tl["op"]))
        filled = pipesim.timeline(**dict(JOB, hw="h100-sxm-8x"), fill_jobs="bert-large-inference")
        fill_ops = int((filled["kind"] == "fill").sum())
        self.assertGreater(fill_ops, 0)
        fig = pipesim.plot.gantt(filled)
        fill_bars = [c for c in fig.axes[0].containers if c.patches[0].get_facecolor()[:3] ==
                     matplotlib.colors.to_rgb(pipesim.plot.KIND_COLOURS["fill"])]
        self.assertEqual(sum(len(c.patches) for c in fill_bars), fill_ops)
        fig = pipesim.plot.memory(self.tl)
        self.assertEqual(len(fig.axes[0].lines), 4)
        results = pipesim.simulate(**dict(JOB, schedule="all"))
        fig = pipesim.plot.bubble_bars(results)
        top = [p.get_y() + p.get_height() for p in fig.axes[0].patches]
        for r in results:
            self.assertTrue(any(abs(t - 100 * r["bubble_fraction"]) < 1e-6 for t in top), r["schedule"])


class ThreadsAndSweeps(unittest.TestCase):
    GRID = {"model": ["llama3-8b", "qwen3-8b", "no-such-model"], "hw": ["rtx4090-8x"], "pp": [4, 8],
            "schedule": ["1f1b"], "global_batch": [16]}

    def test_threads_get_the_same_answers(self):
        expected = without_wall_time(pipesim.simulate(**JOB))
        results = [None] * 4

        def work(i):
            results[i] = without_wall_time(pipesim.simulate(**JOB))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [expected] * 4)

    def test_the_gil_is_released_while_a_command_runs(self):
        # While a command runs in a worker thread, this thread keeps running Python. Held GIL: this thread
        # could only run in the instants before the call enters C++ (a switch interval, 5 ms) and after it;
        # released: its time stamps cover the whole call (a plan search of about a second here).
        import time

        window, stamps, done = [], [], threading.Event()

        def work():
            window.append(time.monotonic())
            pipesim.plan(model="llama3-8b", hw="rtx4090-8x", gpus=8, global_batch=32, top=1)
            window.append(time.monotonic())
            done.set()

        worker = threading.Thread(target=work)
        worker.start()
        while not done.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.001)  # waking up needs the GIL again
        worker.join()
        inside = [t for t in stamps if window[0] < t < window[1]]
        self.assertGreater(window[1] - window[0], 0.1)
        self.assertGreater(max(inside) - min(inside), 0.5 * (window[1] - window[0]))

    def test_sweep_keeps_every_point_in_order(self):
        df = pipesim.sweep(self.GRID, processes=2)
        self.assertEqual(len(df), 6)
        self.assertEqual(df.model.tolist(), ["llama3-8b"] * 2 + ["qwen3-8b"] * 2 + ["no-such-model"] * 2)
        failed = df[df.error != ""]
        self.assertEqual(len(failed), 2)
        self.assertTrue(all(e.startswith("pipesim: error: no-such-model") for e in failed.error))
        ok = df[df.error == ""]
        first = pipesim.simulate(model="llama3-8b", hw="rtx4090-8x", pp=4, schedule="1f1b", global_batch=16)
        self.assertEqual(ok.iloc[0].step_time_s, first["step_time_s"])

    def test_sweep_on_a_local_dask_cluster_equals_local(self):
        from distributed import Client, LocalCluster

        local = pipesim.sweep(self.GRID, processes=1)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as client:
                remote = pipesim.sweep(self.GRID, client=client)
        self.assertTrue(local.equals(remote), f"{local}\n{remote}")


class Invariants(unittest.TestCase):
    def test_a_broken_invariant_raises_invariant_error_not_value_error(self):
        result = pipesim.simulate(**JOB)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "result.json")
            with open(path, "w") as f:
                json.dump(result, f)
            self.assertIn("holds every invariant", pipesim.check(path))
            with open(path, "w") as f:
                json.dump(dict(result, mfu=441.0, hfu=441.0), f)
            with self.assertRaises(pipesim.InvariantError) as e:
                pipesim.check(path)
            self.assertIn("invariant 'hfu-le-1' violated", str(e.exception))
            self.assertNotIsInstance(e.exception, ValueError)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
