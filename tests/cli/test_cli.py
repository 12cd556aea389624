#!/usr/bin/env python3
"""CLI contract tests for `pipesim`: JSON keys, traces, saved plans, determinism and every bad-input path
(one line naming file / JSON path / flag, what is wrong and what is valid, exit code 2)."""
import gzip
import json
import os
import shutil
import subprocess
import signal
import sys
import tempfile
import time
import unittest

from sysfs_cache import last_level_cache_bytes

PIPESIM = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else "pipesim"
SRC = os.environ.get("PIPESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(SRC, "tests", "fixtures")


def run(*args, cwd=None, env=None):
    p = subprocess.run([PIPESIM, *args], capture_output=True, text=True, cwd=cwd, timeout=300, env=env)
    return p.returncode, p.stdout, p.stderr


# OpenMPI keeps allocations until exit; under the sanitizer build's leak checker that is not pipesim's leak.
# OpenMPI's isolated launcher starts processes on this machine without ssh.
MPI_ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", OMPI_MCA_plm="isolated")


class Simulate(unittest.TestCase):
    def test_context_parallelism(self):
        # The same 8 GPUs at 32K tokens, once as tp 8 and once as tp 4 x cp 2: both report 8 GPUs, the same
        # tokens per step, and the cp run says so; its time breakdown has the exchange's share.
        def row(*args):
            rc, out, err = run("simulate", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--seq", "32768",
                               "--pp", "1", "--schedule", "1f1b", "--microbatches", "2", "--format", "json", *args)
            self.assertEqual(rc, 0, err)
            return json.loads(out)
        tp8, cp2 = row("--tp", "8"), row("--tp", "4", "--cp", "2", "--cp-attention", "allgather")
        self.assertEqual(cp2["num_gpus"], 8)
        self.assertEqual(cp2["cp"], 2)
        self.assertNotIn("cp", tp8)
        self.assertAlmostEqual(cp2["tokens_per_s"] * cp2["step_time_s"], tp8["tokens_per_s"] * tp8["step_time_s"],
                               delta=1e-6 * tp8["tokens_per_s"])
        self.assertGreater(cp2["time_breakdown"]["cp_comm"], 0)
        self.assertEqual(tp8["time_breakdown"]["cp_comm"], 0)

    def test_json_keys_for_every_schedule(self):
        rc, out, err = run("simulate", "--model", "llama2-7b", "--hw", "h100-sxm-8x", "--pp", "4", "--tp", "2",
                           "--dp", "2", "--microbatches", "8", "--format", "json")
        self.assertEqual(rc, 0, err)
        rows = json.loads(out)
        # With dp > 1 every order-based schedule also runs with ZeRO 1-3.
        self.assertEqual([(r["schedule"], r["data_parallel"]) for r in rows],
                         [(s, z) for s in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe"]
                          for z in ["ddp", "zero-1", "zero-2", "zero-3"]])
        for r in rows:
            for k in ["schedule", "num_gpus", "step_time_s", "bubble_fraction", "tokens_per_s", "tflops_per_gpu",
                      "mfu", "peak_gpu_mem_bytes", "oom", "ops", "sim_wall_s"]:
                self.assertIn(k, r)
            self.assertEqual(r["num_gpus"], 16)
            self.assertGreater(r["step_time_s"], 0)
            self.assertLess(r["mfu"], 1)
            # tokens/s is global batch x seq / step time
            self.assertAlmostEqual(r["tokens_per_s"], r["global_batch"] * r["seq"] / r["step_time_s"], delta=1e-6 * r["tokens_per_s"])
        self.assertEqual(rows[0]["global_batch"], 2 * 8)

    def test_single_schedule_prints_one_object(self):
        rc, out, err = run("simulate", "--schedule", "1f1b", "--format", "json", "--microbatches", "8")
        self.assertEqual(rc, 0, err)
        self.assertIsInstance(json.loads(out), dict)

    def test_table_and_traces_of_the_default_job(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("simulate", cwd=d)
            self.assertEqual(rc, 0, err)
            for s in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"]:
                self.assertIn(s, out)
                with open(os.path.join(d, "out", s + ".trace.json")) as f:
                    trace = json.load(f)
                phases = {e["ph"] for e in trace["traceEvents"]}
                self.assertTrue({"X", "M", "s", "f", "C"} <= phases, phases)
            self.assertIn("llama3-8b on rtx4090-8x", out)

    def test_saved_plan_runs_to_the_same_prediction(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.json")
            rc, out1, err = run("simulate", "--model", "qwen3-1.7b", "--schedule", "zb-h1", "--pp", "4",
                                "--microbatches", "8", "--plan-out", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            rc, out2, err = run("simulate", "--plan", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            a, b = json.loads(out1), json.loads(out2)
            for k in ["step_time_s", "bubble_fraction", "peak_gpu_mem_bytes", "tokens_per_s", "mfu"]:
                self.assertEqual(a[k], b[k], k)

    def test_deterministic_output(self):
        with tempfile.TemporaryDirectory() as d:
            outs = []
            for i in range(2):
                t = os.path.join(d, f"t{i}.json")
                tl = os.path.join(d, f"tl{i}.json")
                rc, out, err = run("simulate", "--model", "llama2-7b", "--hw", "a100-80g-sxm-8x", "--pp", "2",
                                   "--tp", "2", "--dp", "2", "--schedule", "interleaved-1f1b", "--microbatches", "4",
                                   "--trace", t, "--timeline", tl, "--format", "json")
                self.assertEqual(rc, 0, err)
                j = json.loads(out)
                j.pop("sim_wall_s")
                with open(t) as ft, open(tl) as ftl:
                    outs.append((json.dumps(j), ft.read(), ftl.read()))
            self.assertEqual(outs[0], outs[1])

    def test_profiled_workload_with_fixed_p2p(self):
        rc, out, err = run("simulate", "--workload", os.path.join(FIXTURES, "uniform_workload.json"), "--pp", "4",
                           "--microbatches", "8", "--p2p-time-ms", "0", "--schedule", "1f1b", "--format", "json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        # 4 blocks of fwd 1 ms + bwd 2 ms: (m + p - 1)(f + b) = 11 x 3 ms
        self.assertAlmostEqual(r["step_time_s"], 0.033, places=12)
        self.assertAlmostEqual(r["bubble_fraction"], 3 / 11, places=12)

    def test_plan_names_the_workload_it_places(self):
        rc, out, err = run("plan", "--workload", os.path.join(FIXTURES, "uniform_workload.json"), "--gpus", "4",
                           "--global-batch", "8")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("uniform-4-blocks on 4 x "), out.splitlines()[0])

    def test_hf_config_directly(self):
        rc, out, err = run("simulate", "--model", os.path.join(FIXTURES, "hf", "Qwen__Qwen3-8B.json"), "--pp", "4",
                           "--hw", "a100-80g-sxm-8x", "--schedule", "1f1b", "--microbatches", "8", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["model"], "Qwen__Qwen3-8B")

    def test_reference_timelines_reproduce(self):
        traces = os.path.join(SRC, "traces")
        plans = [f for f in sorted(os.listdir(traces)) if f.endswith(".plan.json")]
        self.assertTrue(plans)
        with tempfile.TemporaryDirectory() as d:
            for plan in plans:
                got = os.path.join(d, "timeline.json")
                rc, _, err = run("simulate", "--plan", os.path.join(traces, plan), "--timeline", got)
                self.assertEqual(rc, 0, err)
                with open(got) as a, open(os.path.join(traces, plan.replace(".plan.json", ".timeline.json"))) as b:
                    now, ref = json.load(a), json.load(b)
                # Every op at the same nanosecond, and every metric the reference has (new metrics may appear).
                self.assertEqual(now["ops"], ref["ops"], plan)
                for key, value in ref["metrics"].items():
                    self.assertEqual(now["metrics"][key], value, f"{plan}: {key}")

    def test_spipe_default_stages_fit_the_model(self):
        # The paper's 2,6 needs 6 blocks per GPU; llama3-8b's 32 blocks on 8 GPUs hold 4: not given, the stages
        # keep B = 3F (1,3) and say why, where the same run with 2,6 given is refused (see the errors below).
        rc, out, err = run("simulate", "--model", "llama3-8b", "--hw", "rtx4090-8x", "--schedule", "spipe",
                           "--format", "json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual(r["note"], "F=1 forward and B=3 backward stages per GPU "
                                    "(chosen for 32 blocks: the default 2,6 needs 48)")
        self.assertEqual(r["partition"], [2] * 8 + [1] * 16)  # 24 backward stages over 32 blocks
        rc, out, err = run("simulate", "--model", "llama3-8b", "--hw", "rtx4090-8x", "--schedule", "spipe",
                           "--spipe-stages", "1,3", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["step_time_s"], r["step_time_s"])

    def test_offload_schedules_report_host_pcie_and_optimizer(self):
        for schedule, iterations in [("mobius", 2), ("spipe", 3), ("roundpipe", 4)]:
            rc, out, err = run("simulate", "--model", "llama2-7b", "--pp", "4", "--schedule", schedule, "--format", "json")
            self.assertEqual(rc, 0, err)
            r = json.loads(out)
            self.assertEqual(r["iterations"], iterations, schedule)
            self.assertGreater(r["peak_host_mem_bytes"], 0)
            self.assertGreater(r["cpu_optimizer_busy_s"], 0)
            self.assertLessEqual(r["cpu_optimizer_exposed_s"], r["cpu_optimizer_busy_s"] + 1e-12)
            self.assertTrue(any(k.endswith("pcie.down") for k in r["pcie_utilization"]), schedule)
            self.assertTrue(all(0 <= u <= 1 + 1e-9 for u in r["pcie_utilization"].values()), schedule)
            self.assertAlmostEqual(r["step_time_s"], r["steady_state_step_time_s"], places=12)
        # LoRA: frozen weights still streamed, far less host state.
        rc, out, _ = run("simulate", "--model", "llama2-7b", "--pp", "4", "--schedule", "roundpipe", "--format", "json")
        full = json.loads(out)
        rc, out, _ = run("simulate", "--model", "llama2-7b", "--pp", "4", "--schedule", "roundpipe", "--lora-rank", "8",
                         "--format", "json")
        lora = json.loads(out)
        self.assertLess(lora["peak_host_mem_bytes"], full["peak_host_mem_bytes"] / 4)

    def test_bubbles(self):
        # 1F1B, 4 stages, fixed-time hops: stage s idles s·f before its first forward and s·b after its last
        # backward; JSON lists every bubble with its kind and free memory.
        rc, out, err = run("bubbles", "--workload", os.path.join(FIXTURES, "uniform_workload.json"), "--pp", "4",
                           "--microbatches", "8", "--p2p-time-ms", "0", "--format", "json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual([g["stage"] for g in r["gpus"]], [0, 1, 2, 3])
        kinds = {"warmup", "forward-backward", "steady", "cooldown", "optimizer-wait", "tail"}
        for g in r["gpus"]:
            self.assertTrue(all(b["kind"] in kinds and b["length_s"] > 0 and b["free_gpu_bytes"] >= 0
                                for b in g["bubbles"]))
            self.assertAlmostEqual(sum(b["length_s"] for b in g["bubbles"]), g["idle_s"], places=9)
        self.assertEqual(r["gpus"][0]["idle_by_kind_s"]["warmup"], 0)
        self.assertGreater(r["gpus"][3]["idle_by_kind_s"]["warmup"], 0)
        rc, out, err = run("bubbles", "--model", "llama3-8b", "--hw", "rtx4090-8x", "--schedule", "roundpipe")
        self.assertEqual(rc, 0, err)
        self.assertIn("repeating pattern", out)
        rc, out, err = run("bubbles", "--schedule", "nosuch")
        self.assertEqual(rc, 2)
        self.assertIn("unknown schedule", err)

    def test_fill_jobs(self):
        rc, out, err = run("fill-jobs")
        self.assertEqual(rc, 0, err)
        self.assertIn("qwen3-1.7b-inference", out)
        rc, out, err = run("simulate", "--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--pp", "4", "--dp", "2",
                           "--microbatches", "8", "--schedule", "1f1b", "--fill-jobs", "qwen3-1.7b-inference",
                           "--fill-policy", "sjf", "--fill-max-slowdown", "0.02", "--format", "json")
        self.assertEqual(rc, 0, err)
        fill = json.loads(out)["fill"]
        self.assertLessEqual(fill["main_slowdown"], 0.02)
        self.assertGreater(fill["fill_gpu_equivalents"], 0)
        self.assertGreater(fill["utilization_with_fill"], fill["utilization_without_fill"])
        self.assertEqual(fill["jobs"][0]["name"], "qwen3-1.7b-inference")
        self.assertGreater(fill["jobs"][0]["units_done"], 0)
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.json")
            with open(bad, "w") as f:
                f.write('{"name": "x", "unit_ms": 1, "units": 10, "colour": "red"}')
            rc, out, err = run("simulate", "--schedule", "1f1b", "--fill-jobs", bad)
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("/colour", err)
            trace = os.path.join(tmp, "t.json")
            rc, out, err = run("simulate", "--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--pp", "4",
                               "--microbatches", "8", "--schedule", "gpipe", "--fill-jobs", "qwen3-1.7b-inference",
                               "--trace", trace)
            self.assertEqual(rc, 0, err)
            with open(trace) as f:
                names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
            self.assertTrue(any(n.startswith("fill") for n in names), names)

    def test_spec_sheet_profile(self):
        # Datasheet figures only: pipesim completes the profile and runs on it like on a shipped one.
        sheet = os.path.join(SRC, "docs", "spec-sheet-h100.json")
        rc, out, err = run("simulate", "--hw", sheet, "--model", "llama3-8b", "--pp", "2", "--tp", "4",
                           "--schedule", "1f1b", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["hardware"], "h100-spec-sheet")

    def test_listings(self):
        rc, out, _ = run("schedules")
        self.assertEqual(rc, 0)
        for s in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"]:
            self.assertIn(s, out)
        rc, out, _ = run("hw")
        self.assertIn("rtx4090-8x", out)
        rc, out, _ = run("models")
        self.assertIn("qwen3-235b-a22b", out)


class Frameworks(unittest.TestCase):
    def test_listing_and_every_result_names_its_framework(self):
        rc, out, _ = run("frameworks", "--format", "json")
        self.assertEqual(rc, 0)
        rows = json.loads(out)
        self.assertEqual([r["name"] for r in rows], ["deepspeed", "fsdp", "hf-transformers", "hf-transformers-compile",
                                                     "megatron-core", "megatron-deepspeed", "megatron-lm-2021",
                                                     "megatron-lm-2022", "nanotron", "torchtitan-2024-12"])
        self.assertEqual({r["name"]: r for r in rows}["hf-transformers-compile"]["attention_mask"], "dense")
        by_name = {r["name"]: r for r in rows}
        self.assertEqual(by_name["megatron-lm-2021"]["grad_accumulation"], "main-grad")
        self.assertEqual(by_name["megatron-deepspeed"]["host_dispatch_us"], 24)
        self.assertEqual(by_name["megatron-deepspeed"]["schedules"], ["1f1b", "zb-h1"])
        # each setting cites code
        self.assertIn("wgrad_gemm_accum_fp32", by_name["megatron-deepspeed"]["sources"]["grad_accumulation"])
        # HF states its own kernels, each entry with its source; the Megatron files keep the built-in ones.
        hf = by_name["hf-transformers"]["kernels"]
        self.assertEqual(hf["residual_bytes"], 4)
        self.assertTrue(all(e["source"] for e in hf["block"]["forward"] + hf["block"]["saved"]))
        self.assertIsNone(by_name["megatron-core"]["kernels"])
        self.assertEqual(by_name["nanotron"]["pipeline_split"], "block-costs")
        self.assertEqual(by_name["fsdp"]["attention_kernel"], "cudnn")
        self.assertEqual(by_name["torchtitan-2024-12"]["attention_kernel"], "flash-attn-2")
        job = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "4", "--schedule", "1f1b"]
        rc, out, _ = run("simulate", *job, "--format", "json")
        core = json.loads(out)
        self.assertEqual(core["framework"], "megatron-core")
        rc, out, _ = run("simulate", *job, "--format", "json", "--framework", "megatron-lm-2022")
        lm = json.loads(out)
        self.assertEqual(lm["framework"], "megatron-lm-2022")
        self.assertGreater(lm["step_time_s"], core["step_time_s"] * 1.1)
        rc, out, _ = run("simulate", *job, "--framework", "megatron-lm-2022")
        self.assertIn("framework megatron-lm-2022", out.splitlines()[0])
        rc, out, _ = run("bubbles", *job, "--framework", "megatron-lm-2021", "--format", "json")
        self.assertEqual(json.loads(out)["framework"], "megatron-lm-2021")
        rc, out, _ = run("partition", "--model", "qwen3-1.7b", "--pp", "4", "--framework", "megatron-lm-2021")
        self.assertIn("framework megatron-lm-2021", out.splitlines()[0])
        rc, out, _ = run("plan", "--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--gpus", "8", "--global-batch", "32",
                         "--schedules", "1f1b", "--top", "1", "--framework", "megatron-lm-2022", "--format", "json")
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(out)[0]["config"]["framework"], "megatron-lm-2022")

    def test_options_override_the_framework_and_files_are_frameworks(self):
        job = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "4", "--schedule", "1f1b", "--format", "json"]
        # Megatron-LM 2022's settings given one by one are the framework.
        flags = ["--attention", "unfused", "--dropout", "--no-sequence-parallel", "--bias-kernels", "separate",
                 "--grad-sync", "after-backward", "--blocking-p2p"]
        _, by_flags, _ = run("simulate", *job, *flags)
        _, by_name, _ = run("simulate", *job, "--framework", "megatron-lm-2022")
        self.assertEqual(json.loads(by_flags)["step_time_s"], json.loads(by_name)["step_time_s"])
        # An option given overrides the framework's setting.
        _, flash, _ = run("simulate", *job, "--framework", "megatron-lm-2022", "--attention", "flash")
        self.assertLess(json.loads(flash)["step_time_s"], json.loads(by_name)["step_time_s"])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(SRC, "frameworks", "megatron-lm-2022.json")) as f:
                mine = json.load(f)
            mine["name"] = "my-megatron"
            mine["settings"]["attention"]["value"] = "flash"
            path = os.path.join(d, "mine.json")
            with open(path, "w") as f:
                json.dump(mine, f)
            rc, out, err = run("simulate", *job, "--framework", path)
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["framework"], "my-megatron")
            self.assertEqual(json.loads(out)["step_time_s"], json.loads(flash)["step_time_s"])

    def test_plan_and_simulate_only_the_schedules_a_framework_runs(self):
        job = ["--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "4", "--framework", "megatron-deepspeed"]
        rc, out, _ = run("simulate", *job, "--format", "json")
        self.assertEqual([r["schedule"] for r in json.loads(out)], ["1f1b", "zb-h1", "mobius", "spipe", "roundpipe"])
        rc, _, err = run("simulate", *job, "--schedule", "dualpipe")
        self.assertEqual((rc, err.strip()), (2, "pipesim: error: --schedule: megatron-deepspeed runs the pipeline "
                                                "schedules 1f1b, zb-h1; valid: those, or a CPU-offload schedule"))
        rc, out, err = run("plan", "--model", "qwen3-1.7b", "--hw", "h100-sxm-8x", "--gpus", "8", "--global-batch",
                           "32", "--framework", "megatron-lm-2022", "--top", "20", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertTrue({r["schedule"] for r in json.loads(out)} <= {"1f1b", "interleaved-1f1b"})
        rc, _, err = run("plan", "--model", "qwen3-1.7b", "--gpus", "8", "--global-batch", "32", "--framework",
                         "megatron-lm-2022", "--schedules", "zb-v")
        self.assertEqual(rc, 2)
        self.assertIn("--schedules: megatron-lm-2022 does not run zb-v; its pipeline schedules: 1f1b, "
                      "interleaved-1f1b", err)

    def test_partition_shows_the_split_a_framework_runs(self):
        # The Ultra-Scale Playbook's 1B model (nanotron scripts/scaling_benchmarks.py): nanotron's build_model puts
        # 6, 5 and 5 blocks on the first three of 4 stages and the output layer alone on the last.
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "1b.json")
            with open(model, "w") as f:
                json.dump({"format": "pipesim-model", "version": 1, "name": "ultrascale-1b", "source": "test",
                           "hidden_size": 2048, "num_layers": 16, "num_heads": 32, "num_kv_heads": 32,
                           "ffn_hidden_size": 8192, "vocab_size": 131072, "tie_embeddings": True,
                           "mlp": "swiglu"}, f)
            job = ["--model", model, "--hw", "h100-sxm-8x", "--pp", "4", "--seq", "4096", "--global-batch", "64"]
            rc, out, err = run("partition", *job, "--framework", "nanotron", "--format", "json")
            self.assertEqual(rc, 0, err)
            result = json.loads(out)
            self.assertEqual(result["framework_split"]["partition"], [6, 5, 5, 0])
            self.assertGreaterEqual(result["gain_over_framework_split"], 1.0)
            rc, out, _ = run("partition", *job, "--framework", "nanotron")
            self.assertIn("nanotron runs its own split --partition 6,5,5,0", out)
            rc, out, _ = run("simulate", *job, "--framework", "nanotron", "--schedule", "1f1b", "--format", "json")
            self.assertEqual(json.loads(out)["partition"], [6, 5, 5, 0])
            rc, out, _ = run("partition", *job, "--format", "json")  # Megatron-Core: no split of its own
            self.assertNotIn("framework_split", json.loads(out))

    def test_bad_frameworks(self):
        rc, _, err = run("simulate", "--framework", "megatron-lm-2020")
        self.assertEqual(rc, 2)
        self.assertIn("megatron-lm-2020: unknown framework; shipped: deepspeed, fsdp, hf-transformers, hf-transformers-compile,", err)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.json")
            with open(path, "w") as f:
                f.write('{"format": "pipesim-framework", "version": 1, "name": "x", "description": "", '
                        '"source": "", "settings": {"attention": {"value": "fused", "source": "here"}}}')
            rc, _, err = run("simulate", "--framework", path)
            self.assertEqual(rc, 2)
            self.assertEqual(err.strip(), f"pipesim: error: {path}: /settings/attention/value: unknown attention "
                                          "kernel 'fused'; valid: unfused, flash")
        for name in os.listdir(os.path.join(SRC, "tests", "fuzz", "corpus", "framework")):
            path = os.path.join(SRC, "tests", "fuzz", "corpus", "framework", name)
            rc, _, err = run("simulate", "--framework", path, "--schedule", "1f1b", "--pp", "2")
            if name.startswith("valid-"):  # seeds the fuzzer mutates from
                self.assertEqual(rc, 0, err)
            else:
                self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), err)


class Planner(unittest.TestCase):
    def test_partition_json_and_gains(self):
        rc, out, err = run("partition", "--model", "qwen3-1.7b", "--pp", "4", "--schedule", "1f1b", "--format", "json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        for k in ["partition", "stage_time_s", "stage_mem_bytes", "uniform", "deepspeed_parameters", "gain_over_uniform"]:
            self.assertIn(k, r)
        self.assertEqual(sum(r["partition"]), 28)
        self.assertLess(r["partition"][-1], 7)  # the heavy head gets a lighter last stage
        self.assertGreater(r["gain_over_uniform"], 1.0)
        self.assertAlmostEqual(max(r["stage_time_s"]), r["bottleneck_s"], places=12)
        rc, out, err = run("partition", "--workload", os.path.join(FIXTURES, "uniform_workload.json"), "--pp", "2",
                           "--p2p-time-ms", "0", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["partition"], [2, 2])
        rc, out, err = run("partition", "--model", "qwen3-8b", "--pp", "8", "--schedule", "roundpipe", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertIn("backward_layer_ranges", json.loads(out))

    def test_uneven_first_and_last_stages(self):
        def partition(*args):
            rc, out, err = run("simulate", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--seq", "1024",
                               "--format", "json", *args)
            self.assertEqual(rc, 0, err)
            return json.loads(out)["partition"]
        # 32 blocks: the embedding and the head alone, 16 + 16 between.
        self.assertEqual(partition("--pp", "4", "--schedule", "1f1b", "--first-stage-layers", "0",
                                   "--last-stage-layers", "0"), [0, 16, 16, 0])
        # Interleaved, 8 chunks: one block on each end, the other 30 over the 6 chunks between.
        self.assertEqual(partition("--pp", "4", "--virtual-stages", "2", "--schedule", "interleaved-1f1b",
                                   "--first-stage-layers", "1", "--last-stage-layers", "1"), [1, 5, 5, 5, 5, 5, 5, 1])
        # Only the last given: 32 - 2 = 30 over 3 chunks.
        self.assertEqual(partition("--pp", "4", "--schedule", "1f1b", "--last-stage-layers", "2"), [10, 10, 10, 2])
        # Llama 3 405B's 8K-phase layout (pp 16, one block per chunk of 8 per rank, embedding and output alone):
        # 126 blocks over the 126 chunks between, as one flag pair instead of a 128-entry list.
        rc, out, err = run("simulate", "--model", "llama3-405b", "--hw", "h100-sxm-8x", "--tp", "8", "--pp", "16",
                           "--dp", "1", "--virtual-stages", "8", "--schedule", "interleaved-1f1b", "--microbatches",
                           "16", "--seq", "1024", "--first-stage-layers", "0", "--last-stage-layers", "0",
                           "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["partition"], [0] + [1] * 126 + [0])
        for args, fragment in [
                (["--partition", "8,8,8,8", "--first-stage-layers", "0"], "give either --partition"),
                (["--first-stage-layers", "20", "--last-stage-layers", "20"], "20 + 20 blocks"),
                (["--pp", "1", "--first-stage-layers", "0"], "a first and a last stage need at least 2")]:
            rc, _, err = run("simulate", "--model", "llama3-8b", "--schedule", "1f1b", *args)
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(fragment, err)

    def test_plan_writes_an_executable_winner(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "best.json")
            rc, out, err = run("plan", "--model", "llama2-7b", "--hw", "h100-sxm-8x", "--gpus", "8",
                               "--global-batch", "32", "--seq", "2048", "--top", "3", "--out", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            ranked = json.loads(out)
            self.assertLessEqual(len(ranked), 3)
            self.assertEqual(ranked[0]["num_gpus"], 8)
            for k in ["step_time_s", "tokens_per_s", "mfu", "peak_gpu_mem_bytes", "config"]:
                self.assertIn(k, ranked[0])
            steps = [r["step_time_s"] for r in ranked]
            self.assertEqual(steps, sorted(steps))
            rc, out, err = run("simulate", "--plan", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["step_time_s"], ranked[0]["step_time_s"])
            rc, out, err = run("explain", plan)
            self.assertEqual(rc, 0, err)
            self.assertIn("critical path", out)
            self.assertIn("speed up", out)
            # Same inputs, same ranking.
            rc, again, _ = run("plan", "--model", "llama2-7b", "--hw", "h100-sxm-8x", "--gpus", "8",
                               "--global-batch", "32", "--seq", "2048", "--top", "3", "--format", "json")
            self.assertEqual([r["config"] for r in json.loads(again)], [r["config"] for r in ranked])

    def test_plan_and_partition_bad_input(self):
        def err_of(*args):
            rc, _, err = run(*args)
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            return err
        self.assertIn("--gpus", err_of("plan", "--model", "llama2-7b", "--global-batch", "8"))
        self.assertIn("--objective", err_of("plan", "--gpus", "8", "--global-batch", "8", "--objective", "speed"))
        self.assertIn("unknown schedule 'nope'", err_of("plan", "--gpus", "8", "--global-batch", "8", "--schedules", "nope"))
        self.assertIn("--gpus: no configuration fits",
                      err_of("plan", "--model", "llama3-70b", "--hw", "rtx4090-8x", "--gpus", "1", "--global-batch", "1",
                             "--schedules", "1f1b"))
        self.assertIn("--max-mem-fraction", err_of("partition", "--pp", "4", "--max-mem-fraction", "2"))
        self.assertIn("no partition into 2 stages fits", err_of("partition", "--model", "llama3-70b", "--pp", "2"))
        self.assertIn("plan is required", err_of("explain"))
        self.assertIn("cannot open file", err_of("explain", "/no/such/plan.json"))


class Buy(unittest.TestCase):
    JOB = ["--model", "qwen3-1.7b", "--global-batch", "32", "--seq", "2048", "--schedules", "1f1b",
           "--recompute", "none"]

    def test_each_cluster_is_plan_on_that_cluster_priced_by_hand(self):
        rc, out, err = run("buy", *self.JOB, "--hw", "h100-sxm-8x,l40s-8x", "--gpus", "8,16", "--tokens", "1e10",
                           "--gpu-hour-usd", "l40s-8x=0.8", "--format", "json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)
        self.assertEqual(r["tokens_per_step"], 65536)
        self.assertEqual(r["steps"], 152588)  # ceil(1e10 / 65,536) = ceil(152,587.89)
        self.assertEqual([(c["hw"], c["gpus"]) for c in r["clusters"]],
                         [("h100-sxm-8x", 8), ("h100-sxm-8x", 16), ("l40s-8x", 8), ("l40s-8x", 16)])
        prices = {"h100-sxm-8x": 3.0, "l40s-8x": 0.8}  # the profile's, and the override
        for c in r["clusters"]:
            rc, plan_out, err = run("plan", *self.JOB, "--hw", c["hw"], "--gpus", str(c["gpus"]), "--top", "1",
                                    "--gpu-hour-usd", str(prices[c["hw"]]), "--format", "json")
            self.assertEqual(rc, 0, err)
            self.assertEqual(c["plan"], json.loads(plan_out)[0])
            step = c["plan"]["step_time_s"]
            self.assertEqual(c["time_to_train_s"], 152588 * step)
            self.assertEqual(c["gpu_hours"], c["gpus"] * (152588 * step) / 3600)
            self.assertEqual(c["usd_per_gpu_hour"], prices[c["hw"]])
            self.assertEqual(c["usd"], c["gpus"] * (152588 * step) / 3600 * prices[c["hw"]])
            watts = {"h100-sxm-8x": 700, "l40s-8x": 350}[c["hw"]]  # the profiles' board power
            self.assertEqual(c["energy_kwh"], c["gpus"] * (152588 * step) / 3600 * watts / 1000)
            self.assertAlmostEqual(c["plan"]["mfu"] + sum(c["losses"].values()), 1.0, places=9)
            self.assertEqual(set(c["losses"]), {"bubbles", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "offload", "optimizer",
                                                "recompute", "other", "below_peak"})
            t = c["plan"]["time_breakdown"]  # the losses are the winner's simulated time breakdown
            for key, loss in (("pipeline_bubble", "bubbles"), ("tp_comm", "tp_comm"), ("dp_comm", "dp_comm")):
                self.assertEqual(c["losses"][loss], t[key])
            self.assertAlmostEqual(sum(t.values()), 1.0, places=9)
            self.assertEqual(c["limiter"] != "", True)
            # Memory holds the microbatch when twice it, the layout otherwise the same, exceeds the search's
            # 90 % of GPU memory.
            cfg = c["plan"]["config"]
            if cfg["microbatch_size"] <= 4 and cfg["microbatches"] % 2 == 0:
                rc, twice, err = run("simulate", "--model", "qwen3-1.7b", "--global-batch", "32", "--seq", "2048",
                                     "--hw", c["hw"], "--pp", str(cfg["pp"]), "--tp",
                                     str(cfg["tp"]), "--dp", str(cfg["dp"]), "--schedule", c["plan"]["schedule"],
                                     "--microbatch-size", str(2 * cfg["microbatch_size"]),
                                     "--microbatches", str(cfg["microbatches"] // 2), "--format", "json",
                                     "--recompute", cfg["recompute"], "--partition", cfg["partition"],
                                     "--virtual-stages", str(cfg["virtual_stages"]),
                                     *(["--fsdp", cfg["fsdp"]] if cfg["fsdp"] else ["--zero", str(cfg["zero"])]),
                                     *(["--optimizer-offload"] if cfg["optimizer_offload"] else []))
                self.assertEqual(rc, 0, err)
                twice = json.loads(twice)
                over = twice["oom"] or twice["peak_gpu_mem_bytes"] > 0.9 * twice["gpu_mem_capacity_bytes"]
                self.assertEqual(c["microbatch_held_by_memory"], over, c["plan"]["config"])
            else:
                self.assertFalse(c["microbatch_held_by_memory"])
        front = [c for c in r["clusters"] if c["pareto"]]
        for c in front:  # nothing else is both at least as fast and as cheap, and better in one
            self.assertFalse(any(o is not c and o["time_to_train_s"] <= c["time_to_train_s"] and o["usd"] <= c["usd"]
                                 and (o["time_to_train_s"] < c["time_to_train_s"] or o["usd"] < c["usd"])
                                 for o in r["clusters"]))
        self.assertTrue(front)

    def test_a_power_limit_prices_the_plan_at_its_clock_and_the_energy_at_the_limit(self):
        args = [*self.JOB, "--hw", "h100-sxm-8x", "--gpus", "8", "--tokens", "1e10", "--format", "json"]
        rc, out, err = run("buy", *args, "--power-limit", "500")
        self.assertEqual(rc, 0, err)
        limited = json.loads(out)["clusters"][0]
        rc, out, err = run("buy", *args)
        self.assertEqual(rc, 0, err)
        rated = json.loads(out)["clusters"][0]
        step = limited["plan"]["step_time_s"]
        self.assertGreater(step, rated["plan"]["step_time_s"])
        self.assertEqual(limited["energy_kwh"], 8 * (152588 * step) / 3600 * 500 / 1000)
        # The plan is the one `plan` finds at the same limit; MFU stays against the rated peak.
        rc, plan_out, err = run("plan", *self.JOB, "--hw", "h100-sxm-8x", "--gpus", "8", "--top", "1",
                                "--power-limit", "500", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(limited["plan"], json.loads(plan_out)[0])
        self.assertLess(limited["plan"]["mfu"], rated["plan"]["mfu"])
        # One line, exit 2, for a limit the profile cannot price.
        rc, out, err = run("buy", *self.JOB, "--hw", "a100-80g-sxm-8x", "--gpus", "8", "--tokens", "1e10",
                           "--power-limit", "300")
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("power_clock_exponent", err)

    def test_memory_holding_the_microbatch_down_is_named(self):
        # Qwen3-1.7B at 4K tokens without recompute on 24 GB cards: b 2 does not fit, so b 1 is memory's choice.
        args = ["--model", "qwen3-1.7b", "--global-batch", "64", "--seq", "4096", "--schedules", "1f1b",
                "--recompute", "none", "--hw", "rtx4090-8x", "--gpus", "8", "--tokens", "1e10"]
        rc, out, err = run("buy", *args, "--format", "json")
        self.assertEqual(rc, 0, err)
        c = json.loads(out)["clusters"][0]
        self.assertEqual(c["plan"]["config"]["microbatch_size"], 1)
        self.assertTrue(c["microbatch_held_by_memory"])
        rc, twice, err = run("simulate", "--model", "qwen3-1.7b", "--global-batch", "64", "--seq", "4096",
                             "--hw", "rtx4090-8x", "--dp", "8", "--schedule", "1f1b", "--recompute", "none",
                             "--zero", str(c["plan"]["config"]["zero"]), "--microbatch-size", "2", "--format", "json")
        self.assertEqual(rc, 0, err)
        twice = json.loads(twice)
        self.assertTrue(twice["oom"] or twice["peak_gpu_mem_bytes"] > 0.9 * twice["gpu_mem_capacity_bytes"])
        rc, out, err = run("buy", *args)
        self.assertEqual(rc, 0, err)
        self.assertIn("memory holds b at 1", out)

    def test_table_and_no_cluster_meeting_the_constraints(self):
        rc, out, err = run("buy", *self.JOB, "--hw", "h100-sxm-8x", "--gpus", "8,12", "--tokens", "1e10")
        self.assertEqual(rc, 0, err)
        self.assertIn("skipped: not whole nodes of 8 GPUs", out)
        self.assertIn("* h100-sxm-8x", out)
        self.assertIn(" MWh ", out)
        rc, out, err = run("buy", *self.JOB, "--hw", "h100-sxm-8x", "--gpus", "8", "--tokens", "1e12",
                           "--max-usd", "1", "--deadline-days", "0.5")
        self.assertEqual(rc, 0, err)  # an answer, not an error
        self.assertIn("no cluster meets the constraints (at most $1, within 0.5 days)", out)

    def test_bad_input(self):
        def err_of(*args):
            rc, _, err = run("buy", *self.JOB, *args)
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            return err
        self.assertIn("unknown hardware profile", err_of("--hw", "h100-sxm-8x,b9000", "--gpus", "8", "--tokens", "1e9"))
        self.assertIn("--tokens", err_of("--hw", "h100-sxm-8x", "--gpus", "8", "--tokens", "1e25"))
        self.assertIn("--tokens", err_of("--hw", "h100-sxm-8x", "--gpus", "8"))
        self.assertIn("--gpus", err_of("--hw", "h100-sxm-8x", "--gpus", "8,x", "--tokens", "1e9"))
        self.assertIn("--gpu-hour-usd", err_of("--hw", "h100-sxm-8x", "--gpus", "8", "--tokens", "1e9",
                                               "--gpu-hour-usd", "h100-sxm-8x:3"))
        self.assertIn("not one of the clusters", err_of("--hw", "h100-sxm-8x", "--gpus", "8", "--tokens", "1e9",
                                                        "--gpu-hour-usd", "l40s-8x=1"))
        with tempfile.TemporaryDirectory() as d:
            priceless = os.path.join(d, "priceless.json")
            with open(os.path.join(SRC, "hw_profiles", "l40s-8x.json")) as f:
                hw = json.load(f)
            del hw["gpu_hour_usd"]
            with open(priceless, "w") as f:
                json.dump(hw, f)
            self.assertIn("--max-usd needs one", err_of("--hw", priceless, "--gpus", "8", "--tokens", "1e9",
                                                        "--max-usd", "100"))


class Calibrate(unittest.TestCase):
    """`pipesim calibrate --quick --cpu-only` on this machine, fed to the simulator."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.profile = os.path.join(cls.dir.name, "here.json")
        rc, _, cls.log = run("calibrate", "--quick", "--cpu-only", "--out", cls.profile)
        assert rc == 0, cls.log
        with open(cls.profile) as f:
            cls.hw = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_profile_is_valid_and_drives_the_simulator(self):
        rc, out, err = run("simulate", "--hw", self.profile, "--schedule", "1f1b", "--microbatches", "8", "--format", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["hardware"], "here")
        host = self.hw["host"]
        self.assertGreater(host["dram_GBps"], 0)
        self.assertGreaterEqual(host["cores"], 1)
        threads = [p["threads"] for p in host["adam_params_per_s_by_threads"]]
        self.assertEqual(threads[0], 1)
        self.assertLessEqual(threads[-1], host["cores"])  # a sweep stops early once more threads stop paying
        self.assertTrue(all(b == 2 * a or b == host["cores"] for a, b in zip(threads, threads[1:])), threads)
        self.assertTrue(all(p["params_per_s"] > 0 for p in host["adam_params_per_s_by_threads"]))
        for key in ["adam_params_per_s_by_threads", "dram_GBps", "cpu_model", "cores", "dram_bytes"]:
            self.assertTrue(host["sources"][key].startswith("calibrated: pipesim calibrate on"), key)
        prov = self.hw["calibrated"]
        for key in ["date", "host", "cpu_model", "method", "samples", "cv", "skipped", "raw"]:
            self.assertIn(key, prov)
        self.assertIn("CUDA benchmarks: skipped by --cpu-only", prov["skipped"])
        self.assertIn("calibrate: [1/", self.log)  # progress lines
        self.assertIn(" s left", self.log)

    def test_every_array_is_four_times_the_last_level_cache(self):
        stream_mib = int(self.log.split("STREAM arrays of ")[1].split(" MiB")[0])
        adam_params = int(self.log.split("Adam over ")[1].split(" M parameters")[0]) << 20
        self.assertGreaterEqual(stream_mib << 20, 4 * last_level_cache_bytes())
        self.assertGreaterEqual(adam_params * 16, 4 * last_level_cache_bytes())  # 16 resident bytes a parameter

    def test_curves_are_monotone_where_physics_says_so(self):
        gemm = [p["efficiency"] for p in self.hw["gpu"]["gemm_efficiency"]]
        self.assertEqual(gemm, sorted(gemm))
        self.assertLessEqual(max(gemm), 1.0)
        for key in ["h2d_GBps_by_size", "d2h_GBps_by_size"]:
            curve = [p["GBps"] for p in self.hw["node"]["pcie"].get(key, [])]
            self.assertEqual(curve, sorted(curve), key)

    def test_simulated_optimizer_op_takes_the_measured_time(self):
        with open(os.path.join(self.dir.name, "here.cpu-raw.json")) as f:
            raw = json.load(f)
        reps = [b for b in raw["benchmarks"] if b["name"].startswith("cpu_adam/") and "/threads:1/" in b["name"]
                and b["run_type"] == "iteration"]
        self.assertTrue(reps)
        params = int(reps[0]["params"])
        times = sorted(b["real_time"] * 1e-3 for b in reps)  # ms -> s per Adam step
        measured = times[len(times) // 2]
        plan = {"format": "pipesim-plan", "version": 1,
                "meta": {"schedule": "hand", "model": "adam", "pp": 1, "tp": 1, "dp": 1, "virtual_stages": 1,
                         "microbatches": 1, "accum_steps": 1, "seq": 1, "global_batch": 1, "recompute": "none",
                         "replicas": "symmetric", "simulated_gpus": 0, "model_flops_per_step": 0,
                         "hardware_flops_per_step": 0, "dtype": "bf16", "partition": [], "note": ""},
                "hardware": self.hw, "nodes": 1,
                "devices": [{"name": "gpu0", "kind": "gpu", "node": 0, "local_index": 0, "resident_bytes": 0},
                            {"name": "host", "kind": "host", "node": 0, "local_index": 0, "resident_bytes": 0}],
                "streams": [{"device": 0, "kind": "compute", "name": "compute"},
                            {"device": 1, "kind": "cpu", "name": "optimizer"}],
                "ops": [{"stream": 1, "kind": "optimizer", "tags": {"stage": -1, "virtual_stage": -1, "microbatch": -1,
                                                                   "layer_begin": -1, "layer_end": -1, "iteration": 0},
                         "cpu": {"params": params, "threads": 1}, "deps": []}]}
        path = os.path.join(self.dir.name, "adam.plan.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        rc, out, err = run("simulate", "--plan", path, "--format", "json")
        self.assertEqual(rc, 0, err)
        simulated = json.loads(out)["step_time_s"]
        self.assertAlmostEqual(simulated, measured, delta=1e-3 * measured)

    def test_skipped_parts_are_named(self):
        out = os.path.join(self.dir.name, "full.json")
        rc, _, err = run("calibrate", "--quick", "--out", out)
        self.assertEqual(rc, 0, err)
        with open(out) as f:
            prov = json.load(f)["calibrated"]
        if prov["gpu_model"]:
            self.assertTrue(os.path.exists(os.path.join(self.dir.name, "full.cuda-raw.json")))
        else:
            why = [s for s in prov["skipped"] if s.startswith("CUDA benchmarks: ")]
            self.assertEqual(len(why), 1, prov["skipped"])
            self.assertIn(why[0], err)

    def test_bad_options(self):
        rc, _, err = run("calibrate", "--quick")
        self.assertEqual(rc, 2)
        self.assertIn("--out", err)
        rc, _, err = run("calibrate", "--base", "nosuch", "--out", os.path.join(self.dir.name, "x.json"))
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1)
        self.assertIn("nosuch: unknown hardware profile", err)


class ImportTrace(unittest.TestCase):
    def test_memory_events_give_each_layers_activation_memory(self):
        """A trace taken with profile_memory=True: GPT-2's with a "[memory]" event (as PyTorch's profiler writes
        them) allocating (i + 1) MiB inside block i's forward and freeing it after the backward. Each block keeps
        its own for the backward, the step's peak is the sum over what was held before, and the workload carries
        them; an execution trace, where given, takes their place."""
        kineto = os.path.join(SRC, "tests", "validation", "traces", "gpt2.kineto.json.gz")
        with gzip.open(kineto) as f:
            trace = json.load(f)
        events = [e for e in trace["traceEvents"] if isinstance(e, dict)]
        blocks = sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(
            "nn.Module: GPT2Block_")), key=lambda e: e["ts"])
        end = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e)
        mib, total = 1 << 20, 1 << 30
        memory = []
        for i, b in enumerate(blocks):
            total += (i + 1) * mib
            memory.append((b["ts"] + 0.5, b["tid"], 4096 * (i + 1), (i + 1) * mib, total))
        peak = total
        for i, b in enumerate(blocks):
            total -= (i + 1) * mib
            memory.append((end + 1 + i, b["tid"], 4096 * (i + 1), -(i + 1) * mib, total))
        for ts, tid, addr, size, after in reversed(memory):  # Kineto writes them last, out of time order
            trace["traceEvents"].append({
                "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": blocks[0]["pid"],
                "tid": tid, "ts": ts, "args": {"Total Reserved": 2 << 30, "Total Allocated": after, "Bytes": size,
                                               "Device Id": 0, "Device Type": 1, "Addr": addr}})
        with tempfile.TemporaryDirectory() as d:
            traced = os.path.join(d, "gpt2-memory.json")
            with open(traced, "w") as f:
                json.dump(trace, f)
            out = os.path.join(d, "w.json")
            rc, stdout, err = run("import-trace", traced, "--out", out, "--format", "json")
            self.assertEqual(rc, 0, err)
            report = json.loads(stdout)
            self.assertEqual(report["memory_source"], "memory events")
            self.assertEqual(report["memory_events"], 2 * len(blocks))
            self.assertEqual(report["allocated_at_start_bytes"], 1 << 30)
            self.assertEqual(report["peak_allocated_bytes"], peak)
            self.assertEqual(report["peak_reserved_bytes"], 2 << 30)
            saved = [layer["saved_bytes"] for layer in report["layers"]]
            self.assertEqual(saved, [0] + [(i + 1) * mib for i in range(len(blocks))] + [0])
            with open(out) as f:
                workload = json.load(f)
            self.assertEqual([layer.get("activation_bytes", 0) for layer in workload["layers"]], saved)
            rc, stdout, err = run("import-trace", traced, "--out", out)
            self.assertEqual(rc, 0, err)
            self.assertIn(f"the GPU's allocated memory ({2 * len(blocks)} memory events): 1024.0 MiB before the "
                          f"step, {peak / mib:.1f} MiB at its peak (2048.0 MiB reserved by the caching allocator)",
                          stdout)
            self.assertIn("from the memory events", stdout)
            et = os.path.join(SRC, "tests", "validation", "traces", "gpt2.et.json.gz")
            rc, stdout, err = run("import-trace", traced, "--et", et, "--out", out, "--format", "json")
            self.assertEqual(rc, 0, err)
            report = json.loads(stdout)
            self.assertEqual(report["memory_source"], "execution trace")
            self.assertNotEqual([layer["saved_bytes"] for layer in report["layers"]], saved)
            self.assertEqual(report["peak_allocated_bytes"], peak)


    def test_all_steps_a_trace_marks_averaged(self):
        """--all-steps imports the mean of the steps a trace marks (two of the tiny loop, the second's kernels
        10 times as long): each layer's GPU time between the two steps', its launches as in each; with --step it
        is one line."""
        with open(os.path.join(SRC, "tests", "fuzz", "corpus", "trace_import", "two-profiler-steps.json")) as f:
            events = json.load(f)
        second = next(e["ts"] for e in events["traceEvents"] if e["name"] == "ProfilerStep#2")
        for e in events["traceEvents"]:
            if e["cat"] == "kernel" and e["ts"] > second:
                e["dur"] *= 10
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "two-steps.json")
            with open(trace, "w") as f:
                json.dump(events, f)
            out = os.path.join(d, "w.json")
            reports = {}
            for args in (["--step", "1"], ["--step", "2"], ["--all-steps"]):
                rc, stdout, err = run("import-trace", trace, "--out", out, "--format", "json", *args)
                self.assertEqual(rc, 0, err)
                reports[args[-1]] = json.loads(stdout)
            mean = reports["--all-steps"]
            self.assertEqual(mean["averaged_steps"], 2)
            self.assertEqual(mean["step"], "ProfilerStep#1 to ProfilerStep#2")
            self.assertAlmostEqual(reports["2"]["gpu_ms"], 10 * reports["1"]["gpu_ms"], places=6)
            self.assertAlmostEqual(mean["gpu_ms"], (reports["1"]["gpu_ms"] + reports["2"]["gpu_ms"]) / 2, places=6)
            for i, layer in enumerate(mean["layers"]):
                for p in ("forward", "backward"):
                    self.assertAlmostEqual(layer[p]["gpu_ms"], (reports["1"]["layers"][i][p]["gpu_ms"] +
                                                                reports["2"]["layers"][i][p]["gpu_ms"]) / 2, places=6)
                    self.assertEqual(layer[p]["launches"], reports["2"]["layers"][i][p]["launches"])
            rc, stdout, err = run("import-trace", trace, "--out", out, "--all-steps")
            self.assertEqual(rc, 0, err)
            self.assertIn("the mean of the 2 steps the trace marks, ProfilerStep#1 to ProfilerStep#2", stdout)
            rc, _, err = run("import-trace", trace, "--out", out, "--all-steps", "--step", "1")
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("--all-steps", err)


class Startup(unittest.TestCase):
    def expect_never_loaded(self, names, linked_names, commands):
        """None of `linked_names` is linked into pipesim, and none of `names` is opened by the loader while
        each of `commands` runs."""
        linked = subprocess.run(["ldd", PIPESIM], capture_output=True, text=True).stdout
        for name in linked_names:
            self.assertNotIn(name, linked, "linked at build time")
        for args in commands:
            rc, out, err = run(*args, env=dict(os.environ, LD_DEBUG="files"))
            self.assertEqual(rc, 0, err[-500:])
            loaded = [line for line in err.splitlines() if "file=" in line]
            self.assertTrue(loaded, "LD_DEBUG reports the objects the loader opens")
            for name in names:
                self.assertFalse([line for line in loaded if name in line], f"{args} loaded {name}")

    def test_the_simulator_loads_no_cuda_library(self):
        """Only `calibrate` on a GPU and `replay --backend cuda` load CUDA (their modules, on demand); the
        simulator, planner and every other command load none of it, whether or not CUDA is installed."""
        cuda = ("libcuda.", "libcudart", "libcublas", "libcupti", "libnvrtc", "cuda_replay", "cuda_calibration")
        self.expect_never_loaded(cuda, cuda[:5], (
            ["hw"], ["simulate", "--schedule", "1f1b", "--format", "json"],
            ["plan", "--model", "llama2-7b", "--gpus", "8", "--global-batch", "16", "--top", "1"]))

    def test_only_multi_node_replay_loads_mpi(self):
        """MPI's libraries (OpenMPI, hwloc, libevent: over a millisecond of every start) are a module that
        `replay --mpi` loads; no other command links or loads them."""
        mpi = ("libmpi", "libopen-pal", "libopen-rte", "pipesim_mpi_transport")
        self.expect_never_loaded(mpi, mpi[:3], (["hw"], ["simulate", "--schedule", "1f1b", "--format", "json"]))


class BadInput(unittest.TestCase):
    def expect_error(self, args, *fragments, cwd=None):
        rc, out, err = run(*args, cwd=cwd)
        self.assertEqual(rc, 2, f"{args}: rc={rc} out={out} err={err}")
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        for f in fragments:
            self.assertIn(f, lines[0])

    def test_fp8_recipe_bad_input(self):
        self.expect_error(["simulate", "--dtype", "fp8", "--fp8-recipe", "blockwise"], "--fp8-recipe")

    def test_collectives_bad_input(self):
        self.expect_error(["collectives", "--hw", "rtx4090-8x", "--gpus-per-node", "9"], "--gpus-per-node",
                          "valid: 1 to the 8 of a rtx4090-8x node")
        self.expect_error(["collectives", "--min-bytes", "2G", "--max-bytes", "1M"], "--min-bytes",
                          "valid: at most it")
        self.expect_error(["collectives", "--gpus-per-node", "1"], "--nodes", "valid: 2 GPUs or more")
        self.expect_error(["collectives", "--op", "broadcast"], "--op")
        self.expect_error(["collectives", "--max-bytes", "lots"], "--max-bytes")

    def test_import_trace_execution_trace_bad_input(self):
        traces = os.path.join(SRC, "tests", "validation", "traces")
        kineto = os.path.join(traces, "gpt2.kineto.json.gz")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "w.json")
            missing = os.path.join(d, "none.et.json")
            self.expect_error(["import-trace", kineto, "--et", missing, "--out", out], missing, "cannot open")
            bad = os.path.join(d, "bad.et.json")
            with open(bad, "w") as f:
                f.write('{"nodes": [{"id": 1, "inputs": {"values": [[5, 6, 0, -3, 2, "cuda:0"]]}}]}')
            self.expect_error(["import-trace", kineto, "--et", bad, "--out", out], bad, "/nodes/0/inputs/values",
                              "valid: both >= 0")
            # Another model's execution trace: its forward is not the Kineto trace's.
            other = os.path.join(traces, "qwen3-1.7b-4layers.et.json.gz")
            self.expect_error(["import-trace", kineto, "--et", other, "--out", out], other,
                              "trace the same model at the same shapes")
            self.assertFalse(os.path.exists(out))
            # A step the trace does not mark (this one marks none).
            self.expect_error(["import-trace", kineto, "--step", "3", "--out", out], kineto, "marks no steps")
            self.expect_error(["import-trace", kineto, "--step", "-1", "--out", out], "--step")

    def test_import_trace_profiler_cost(self):
        """The profiler's own cost per recorded event comes out of the trace's CPU time: with none taken out the
        GPU waits longer for the CPU than with the default, and the workload's passes say so; a cost outside
        0 to 1000 us is one line."""
        kineto = os.path.join(SRC, "tests", "validation", "traces", "gpt2.kineto.json.gz")
        with tempfile.TemporaryDirectory() as d:
            waits = {}
            for cost in ("0", "5"):
                out = os.path.join(d, cost + ".json")
                rc, stdout, err = run("import-trace", kineto, "--out", out, "--format", "json",
                                      "--profiler-op-us", cost, "--profiler-python-us", cost)
                self.assertEqual(rc, 0, err)
                report = json.loads(stdout)
                waits[cost] = report["host_wait_ms"]
                with open(out) as f:
                    layers = json.load(f)["layers"]
                self.assertAlmostEqual(sum(l["fwd_host_wait_ms"] + l["bwd_host_wait_ms"] for l in layers),
                                       report["host_wait_ms"] - report["optimizer"]["host_wait_ms"], places=3)
                # The replayed step is the kernels and the waits, one stream.
                self.assertAlmostEqual(report["replayed_step_ms"], report["gpu_ms"] + report["host_wait_ms"],
                                       places=3)
            self.assertGreater(waits["0"], 2 * waits["5"])
            # Fitted to GPT-2's step measured without the profiler (trace_meta.json: 73.47 ms): replayed to it.
            rc, stdout, err = run("import-trace", kineto, "--out", os.path.join(d, "fit.json"), "--format", "json",
                                  "--measured-step-ms", "73.47")
            self.assertEqual(rc, 0, err)
            report = json.loads(stdout)
            self.assertAlmostEqual(report["replayed_step_ms"], 73.47, delta=0.08)
            self.assertAlmostEqual(report["profiler_op_us"] / report["profiler_python_us"], 2.5, places=6)
            out = os.path.join(d, "x.json")
            self.expect_error(["import-trace", kineto, "--out", out, "--measured-step-ms", "0"], "--measured-step-ms")
            self.expect_error(["import-trace", kineto, "--out", out, "--profiler-op-us", "-1"], "--profiler-op-us")
            self.expect_error(["import-trace", kineto, "--out", out, "--profiler-python-us", "lots"],
                              "--profiler-python-us")
            self.assertFalse(os.path.exists(out))

    def test_calibrate_from_nccl_tests(self):
        # Two nodes' all_reduce_perf and four nodes' all_gather_perf, as nccl-tests 2.13 prints them (here with
        # mpirun --tag-output): the profile keeps each at 256 MiB by node count, and `collectives` gives it back.
        def output(op, nodes, busbw, tag=""):
            lines = [f"# Collective test starting: {op}_perf", "#"]
            lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r} on node{r // 8} device  {r % 8} [0x{r + 16:02x}] "
                      "NVIDIA H100 80GB HBM3" for r in range(8 * nodes)]
            lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                      "time   algbw   busbw #wrong"]
            lines += [f"   {size}  {size // 4}  float  sum  -1  1000.0  1.00  {bw:.2f}  0  1000.0  1.00  1.00  0"
                      for size, bw in ((67108864, busbw / 2), (268435456, busbw))]
            return "\n".join(tag + line for line in lines) + "\n"
        with tempfile.TemporaryDirectory() as d:
            ar, ag = os.path.join(d, "ar2.txt"), os.path.join(d, "ag4.txt")
            with open(ar, "w") as f:
                f.write(output("all_reduce", 2, 300.0))
            with open(ag, "w") as f:
                f.write(output("all_gather", 4, 120.0, "[1,0]<stdout>:"))
            out = os.path.join(d, "mine.json")
            rc, stdout, err = run("calibrate", "--from-nccl-tests", ar, ag, "--base", "h100-p5-8x", "--out", out)
            self.assertEqual(rc, 0, err)
            self.assertIn("all_gather         4 nodes    120.00 GB/s", stdout)
            with open(out) as f:
                net = json.load(f)["network"]
            self.assertEqual(net["collective_busbw_by_nodes"]["message_bytes"], 268435456)
            self.assertEqual(net["collective_busbw_by_nodes"]["all_reduce"], [{"nodes": 2, "GBps": 300.0}])
            self.assertNotIn("reduce_scatter", net["collective_busbw_by_nodes"])
            self.assertIn("ag4.txt (all_gather_perf, 4 nodes x 8 GPUs", net["sources"]["collective_busbw_by_nodes"])
            rc, stdout, err = run("collectives", "--hw", out, "--op", "all-gather", "--nodes", "4", "--min-bytes",
                                  "256M", "--max-bytes", "256M", "--format", "json")
            self.assertEqual(rc, 0, err)
            self.assertAlmostEqual(json.loads(stdout)["sizes"][0]["busbw_GBps"], 120.0, places=3)
            # Held to the run it came from: the run's collective, nodes and sizes, each beside what it measured.
            rc, stdout, err = run("collectives", "--hw", out, "--against", ag, "--format", "json")
            self.assertEqual(rc, 0, err)
            report = json.loads(stdout)
            self.assertEqual((report["op"], report["nodes"]), ("all-gather", 4))
            self.assertEqual([row["bytes"] for row in report["sizes"]], [67108864, 268435456])
            self.assertEqual(report["sizes"][0]["measured_busbw_GBps"], 60.0)
            self.assertAlmostEqual(report["sizes"][1]["error_pct"], 0.0, places=3)
            self.assertAlmostEqual(report["median_abs_error_pct"],
                                   sum(abs(row["error_pct"]) for row in report["sizes"]) / 2, places=9)
            self.expect_error(["collectives", "--hw", "rtx3090-4x", "--against", ar], "ar2.txt",
                              "16 ranks on 2 nodes", "at most the 4 of a rtx3090-4x node")
            bad = os.path.join(d, "x.json")
            self.expect_error(["calibrate", "--from-nccl-tests", ar, ar, "--out", bad], "ar2.txt",
                              "a second all_reduce_perf run on 2 nodes")
            self.expect_error(["calibrate", "--from-nccl-tests", ar, "--nccl-tests-bytes", "1M", "--out", bad],
                              "no result at 1048576 bytes")
            with open(ag, "w") as f:
                f.write("# Collective test starting: all_gather_perf\n   1024  256 float none -1 1.0 1.0 1.0 0\n")
            self.expect_error(["calibrate", "--from-nccl-tests", ag, "--out", bad], "ag4.txt", "line 2",
                              "a result row before the column header")
            self.assertFalse(os.path.exists(bad))

    def test_calibrate_from_trace_with_a_framework(self):
        """The trace's framework sets the share of the streaming rate its element-wise kernels reach: the same
        trace fit for hf-transformers (0.87) gives the profile a rate 1 / 0.87 times the one for megatron-core
        (the full rate); an unknown framework is one line."""
        trace = os.path.join(SRC, "tests", "validation", "traces", "qwen3-1.7b-4layers.kineto.json.gz")
        with tempfile.TemporaryDirectory() as d:
            rates = {}
            for framework in ("hf-transformers", "megatron-core"):
                out = os.path.join(d, framework + ".json")
                rc, stdout, err = run("calibrate", "--from-trace", trace, "--out", out, "--framework", framework)
                self.assertEqual(rc, 0, err)
                self.assertIn("streaming efficiency", stdout)
                with open(out) as f:
                    gpu = json.load(f)["gpu"]
                self.assertIn("--from-trace", gpu["sources"]["hbm_efficiency"])
                rates[framework] = gpu["hbm_efficiency"]
            self.assertAlmostEqual(rates["hf-transformers"] * 0.87, rates["megatron-core"], places=3)
            # The framework as the trace ran it: hf-transformers with the trace's CPU time a launch, the profiler's
            # own cost taken out (the 4-layer Qwen3 trace: 30.6 us, against the 24 measured without a profiler), a
            # file `simulate --framework` takes.
            fitted = os.path.join(d, "hf-qwen3.json")
            rc, stdout, err = run("calibrate", "--from-trace", trace, "--out", os.path.join(d, "p.json"),
                                  "--framework", "hf-transformers", "--framework-out", fitted)
            self.assertEqual(rc, 0, err)
            with open(fitted) as f:
                framework = json.load(f)
            self.assertEqual(framework["name"], "hf-qwen3")
            self.assertTrue(20 < framework["settings"]["host_dispatch_us"]["value"] < 32)
            self.assertIn("calibrate --from-trace", framework["settings"]["host_dispatch_us"]["source"])
            # And each layer's launches a pass as the trace counted them: a block's 67 forward (what the
            # framework's entries count for Qwen3) and 133 backward (the mean of 130 and three 134s), the
            # embedding's 20 and 7 (the rotary tables and the mask are made before the first block), the head's
            # 16 and 24.
            launches = {layer: framework["kernels"][layer]["launches"] for layer in ("embedding", "block", "head")}
            self.assertEqual([(n["forward"], n["backward"]) for n in launches.values()], [(20, 7), (67, 133), (16, 24)])
            self.assertIn("the mean of its 4 Qwen3DecoderLayer blocks", launches["block"]["source"])
            self.assertIn("launches a block 67 forward, 133 backward", stdout)
            # A trace that names no modules still times the CPU; its layers keep the framework's own launches,
            # and the command says why in one line.
            with gzip.open(trace) as f:
                events = json.load(f)
            for e in events["traceEvents"]:
                if isinstance(e, dict) and str(e.get("name", "")).startswith("nn.Module"):
                    e["cat"] = "cpu_op"
            bare = os.path.join(d, "bare.json")
            with open(bare, "w") as f:
                json.dump(events, f)
            rc, stdout, err = run("calibrate", "--from-trace", bare, "--out", os.path.join(d, "q.json"),
                                  "--framework", "hf-transformers", "--framework-out", fitted)
            self.assertEqual(rc, 0, err)
            self.assertIn("its layers' launches kept:", stdout)
            self.assertIn("no nn.Module spans", stdout)
            with open(fitted) as f:
                self.assertNotIn("launches", json.load(f)["kernels"]["block"])
            rc, stdout, err = run("simulate", "--framework", fitted, "--model", "qwen3-1.7b", "--hw", "h100-sxm-8x",
                                  "--pp", "1", "--microbatches", "1", "--schedule", "1f1b", "--seq", "2048")
            self.assertEqual(rc, 0, err)
            self.assertIn("framework hf-qwen3", stdout)
            out = os.path.join(d, "x.json")
            self.expect_error(["calibrate", "--from-trace", trace, "--out", out, "--framework", "nosuch"], "nosuch")
            self.assertFalse(os.path.exists(out))

    def test_unknown_words_are_named_with_the_nearest_valid_one(self):
        self.expect_error(["simulat"], "unknown command 'simulat'", "did you mean 'simulate'?", "valid: simulate,")
        self.expect_error(["import-nothing"], "unknown command 'import-nothing'", "valid:")
        self.expect_error(["simulate", "--modle", "llama3-8b"], "unknown option '--modle' for 'simulate'",
                          "did you mean '--model'?")
        self.expect_error(["plan", "--gpus", "8", "--globl-batch=8"], "unknown option '--globl-batch'",
                          "did you mean '--global-batch'?")
        self.expect_error(["simulate", "--zzzzzzzzzz"], "unknown option '--zzzzzzzzzz'")
        rc, _, err = run("simulate", "--zzzzzzzzzz")
        self.assertNotIn("did you mean", err)  # nothing near enough to be a typo of it
        self.expect_error(["simulate", "--model"], "--model", "missing")  # known words keep the parser's message

    def test_tensor_parallel_overlap_and_score_bandwidth(self):
        self.expect_error(["simulate", "--tp-overlap", "sideways"], "--tp-overlap", "backward,none")
        with open(os.path.join(SRC, "hw_profiles", "a100-80g-sxm-8x.json")) as f:
            profile = json.load(f)
        profile["gpu"]["unfused_attention_efficiency"] = 1.7
        with tempfile.TemporaryDirectory() as d:
            bad_hw = os.path.join(d, "bad-hw.json")
            with open(bad_hw, "w") as f:
                json.dump(profile, f)
            self.expect_error(["simulate", "--hw", bad_hw], bad_hw, "/gpu/unfused_attention_efficiency",
                              "valid: 0.01 .. 1")
            plan = os.path.join(d, "tp2.plan.json")
            rc, _, err = run("simulate", "--model", "llama2-7b", "--hw", "a100-80g-sxm-8x", "--tp", "2", "--pp", "1",
                             "--seq", "256", "--attention", "unfused", "--dropout", "--schedule", "1f1b",
                             "--plan-out", plan)
            self.assertEqual(rc, 0, err)
            with open(plan) as f:
                saved = json.load(f)
            streams = [s["name"] for s in saved["streams"]]
            self.assertIn("tp", streams)  # the backward's all-reduce beside the weight gradients
            first = next(i for i, op in enumerate(saved["ops"]) if op.get("compute", {}).get("score_bytes", 0) > 0)
            saved["ops"][first]["compute"]["score_bytes"] = saved["ops"][first]["compute"]["mem_bytes"] + 1
            with open(plan, "w") as f:
                json.dump(saved, f)
            self.expect_error(["simulate", "--plan", plan], plan, f"/ops/{first}/compute/score_bytes",
                              "exceeds mem_bytes")

    def test_bias_kernels_and_norm_backward(self):
        self.expect_error(["simulate", "--bias-kernels", "epilogue"], "--bias-kernels", "fused,separate")
        self.expect_error(["simulate", "--norm-backward", "2"], "--norm-backward", "one-pass,two-pass")
        job = ["--hw", "a100-80g-sxm-8x", "--tp", "2", "--pp", "2", "--global-batch", "8", "--seq", "512",
               "--schedule", "1f1b", "--format", "json"]

        def step(model, *options):
            rc, out, err = run("simulate", "--model", model, *job, *options)
            self.assertEqual(rc, 0, err)
            return json.loads(out)["step_time_s"]

        # A GPT preset's biases and norms cost time when their kernels are separate, each on its own and
        # more together; a Llama (no biases) pays only for its norms.
        gpt = step("gpt-40b")
        with_bias = step("gpt-40b", "--bias-kernels", "separate")
        with_norm = step("gpt-40b", "--norm-backward", "two-pass")
        self.assertGreater(with_bias, gpt)
        self.assertGreater(with_norm, gpt)
        self.assertGreater(step("gpt-40b", "--bias-kernels", "separate", "--norm-backward", "two-pass"), with_bias)
        self.assertEqual(step("llama2-7b", "--bias-kernels", "separate"), step("llama2-7b"))
        self.assertGreater(step("llama2-7b", "--norm-backward", "two-pass"), step("llama2-7b"))

    def test_files_that_are_not_json_files(self):
        with tempfile.TemporaryDirectory() as d:
            huge = os.path.join(d, "huge-number.json")
            with open(huge, "w") as f:
                f.write('{"format": "pipesim-model", "version": 1, "name": "x", "hidden_size": 1e400}')
            self.expect_error(["simulate", "--model", huge], huge, "unusable JSON", "number overflow")
            deep = os.path.join(d, "deep.json")
            with open(deep, "w") as f:
                f.write('{"a": ' + "[" * 100000 + "]" * 100000 + "}")
            self.expect_error(["simulate", "--model", deep], deep, "nested deeper than 64 levels")
            self.expect_error(["simulate", "--model", d], d, "is a directory")
        self.expect_error(["simulate", "--model", "/dev/zero"], "/dev/zero", "not a regular file")
        self.expect_error(["simulate", "--model", "llama2-7b", "--pp", "2", "--schedule", "1f1b", "--plan-out",
                           "/dev/full"], "/dev/full", "not a regular file")
        self.expect_error(["simulate", "--model", "llama2-7b", "--p2p-time-ms", "nan"], "--p2p-time-ms",
                          "not a number")
        self.expect_error(["simulate", "--schedule", "a\nb"], "unknown schedule 'a\\nb'")
        self.expect_error(["plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "32",
                           "--gpu-hour-usd", "nan"], "--gpu-hour-usd", "valid: 0")
        with open(os.path.join(FIXTURES, "hf", "meta-llama__Llama-3.1-8B.json")) as f:
            hf = json.load(f)
        with tempfile.TemporaryDirectory() as d:
            for key, value, needle in [("model_type", 5, "/model_type: expected a string"),
                                       ("tie_word_embeddings", "yes", "/tie_word_embeddings: expected true or false")]:
                path = os.path.join(d, f"{key}.json")
                with open(path, "w") as f:
                    json.dump(dict(hf, **{key: value}), f)
                self.expect_error(["simulate", "--model", path, "--pp", "2"], path, needle)

    def test_fuzz_regression_inputs(self):
        """Every crasher or wrong answer found so far (tests/fuzz/corpus/*/regression-*) is one line, exit 2."""
        corpus = os.path.join(SRC, "tests", "fuzz", "corpus")
        expected = {
            "regression-op-stream-out-of-range.json": "/ops/0/stream: no stream 999",
            "regression-stream-device-out-of-range.json": "/streams/0/device: no device 999",
            "regression-duration-near-int64-max.json": "/ops/0/duration_ns: value 9000000000000000000 out of range",
            "regression-alloc-int64-max.json": "/ops/0/alloc_bytes: value 9223372036854775807 out of range",
            "regression-iterations-int32-max.json": "/meta/iterations: 2147483647 iterations, but the ops run 1",
            "regression-cycle-through-optimizer.json": "the plan can never finish: a cycle of 3 ops",
        }
        for name, needle in expected.items():
            path = os.path.join(corpus, "plan", name)
            self.expect_error(["simulate", "--plan", path], path, needle)
            self.expect_error(["explain", path], path, needle)
        model = os.path.join(corpus, "model", "regression-dimension-products-overflow.json")
        self.expect_error(["simulate", "--model", model], model, "heads x head_dim = 281474976710656 is out of range")
        workload = os.path.join(corpus, "workload", "regression-activation-sum-overflow.json")
        self.expect_error(["simulate", "--workload", workload], workload, "activation_bytes: value 1125899906842624")
        self.assertEqual(sorted(n for n in os.listdir(os.path.join(corpus, "plan")) if n.startswith("regression-")),
                         sorted(expected))
        # Command lines (one argument per line): a preset name longer than the file system allows was
        # std::filesystem's exception (exit 1); it is an unknown preset like any other.
        with open(os.path.join(corpus, "cli_args", "regression-model-name-too-long.txt")) as f:
            args = f.read().split("\n")
        self.expect_error(args, "unknown model preset")
        self.expect_error(["simulate", "--hw", "h" * 5000], "unknown hardware profile")

    def test_interrupted_calibration_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "mine.json")
            p = subprocess.Popen([PIPESIM, "calibrate", "--quick", "--cpu-only", "--out", out],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(timeout=60), -signal.SIGINT)
            self.assertEqual(os.listdir(d), [], "no profile, no raw results, no temporaries")

    def test_file_names_that_are_not_utf8(self):
        """A file name is bytes: JSON outputs that echo it carry U+FFFD for what is not UTF-8."""
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "p\udcff.plan.json")  # the byte 0xff, through surrogateescape
            shutil.copy(os.path.join(SRC, "tests", "fuzz", "corpus", "plan", "tiny-1f1b-pp2.plan.json"), plan)
            rc, out, err = run("explain", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["plan"], os.path.join(d, "p\ufffd.plan.json"))
            rc, out, err = run("simulate", "--plan", plan, "--format", "json", "--timeline",
                               os.path.join(d, "t\udcff.json"))
            self.assertEqual(rc, 0, err)

    def test_sharded_data_parallelism(self):
        base = ["simulate", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "1", "--dp", "8",
                "--global-batch", "16", "--microbatch-size", "1", "--schedule", "1f1b", "--format", "json"]
        peaks = {}
        for z in ["0", "1", "2", "3"]:
            rc, out, err = run(*base, "--zero", z)
            self.assertEqual(rc, 0, err)
            r = json.loads(out)
            self.assertEqual(r["data_parallel"], "ddp" if z == "0" else "zero-" + z)
            peaks[z] = r["peak_gpu_mem_bytes"]
        self.assertGreater(peaks["0"], peaks["1"])
        self.assertGreater(peaks["1"], peaks["2"])
        self.assertGreater(peaks["2"], peaks["3"])
        # The trace shows each layer's gather and reduce-scatter.
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "t.json")
            rc, out, err = run(*base, "--fsdp", "full", "--trace", trace)
            self.assertEqual(rc, 0, err)
            with open(trace) as f:
                names = [e.get("name", "") for e in json.load(f)["traceEvents"]]
            self.assertTrue(any(n.startswith("allgather") for n in names))
            self.assertTrue(any(n.startswith("reducescatter") for n in names))
        # --schedule all (the default) with dp > 1 adds the ZeRO variants, each with its own trace.
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = run("simulate", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--pp", "2", "--dp", "4",
                               "--global-batch", "16", "--trace-dir", tmp)
            self.assertEqual(rc, 0, err)
            self.assertIn("1f1b zero-3", out)
            self.assertTrue(os.path.exists(os.path.join(tmp, "1f1b.zero-3.trace.json")))
            self.assertTrue(os.path.exists(os.path.join(tmp, "1f1b.trace.json")))
        rc, out, err = run(*base, "--zero", "3", "--offload", "both")
        self.assertEqual(rc, 0, err)
        self.assertGreater(json.loads(out)["peak_host_mem_bytes"], 0)
        self.expect_error(base + ["--zero", "5"], "--zero")
        self.expect_error(base + ["--offload", "params"], "--offload: parameters are offloaded per layer only when")
        self.expect_error(base + ["--fsdp", "hybrid"], "--fsdp: hybrid shards over the data-parallel ranks of a node")
        self.expect_error(["simulate", "--schedule", "mobius", "--pp", "4", "--dp", "2", "--zero", "1"],
                          "--zero: mobius places weights and optimizer state its own way")
        rc, out, err = run("plan", "--model", "llama3-8b", "--hw", "rtx4090-8x", "--gpus", "8", "--global-batch", "16",
                           "--pp", "1", "--schedules", "1f1b", "--top", "3")
        self.assertEqual(rc, 0, err)
        self.assertIn("why sharded:", out)
        self.expect_error(["plan", "--gpus", "8", "--global-batch", "8", "--data-parallel", "zero-9"], "--data-parallel")

    def test_cli_flags(self):
        self.expect_error(["simulate", "--schedule", "2f2b"], "unknown schedule '2f2b'; valid: gpipe, 1f1b")
        self.expect_error(["simulate", "--pp", "0"], "--pp")
        self.expect_error(["simulate", "--tp", "3"], "--tp: tp 3 must divide the 8 GPUs")
        self.expect_error(["simulate", "--recompute", "some"], "--recompute")
        self.expect_error(["simulate", "--bogus"], "--bogus")
        self.expect_error(["simulate", "--microbatches", "abc"], "--microbatches")
        self.expect_error(["simulate", "--partition", "1,2"], "--partition: has 2 entries; expected pp x virtual stages = 8")
        self.expect_error(["simulate", "--global-batch", "7", "--dp", "2"], "--global-batch: 7 is not divisible")
        self.expect_error(["simulate", "--schedule", "interleaved-1f1b", "--microbatches", "6"],
                          "needs microbatches divisible by pp")
        self.expect_error(["simulate", "--pp", "8", "--dp", "2", "--nodes", "1"], "--nodes")
        self.expect_error(["simulate", "--schedule", "1f1b", "--pp", "64"], "exceeds the model's 32 transformer blocks")
        self.expect_error(["simulate", "--format", "xml"], "--format")
        self.expect_error(["simulate", "--cp", "2", "--cp-attention", "striped"], "--cp-attention",
                          "valid: ring, allgather")
        self.expect_error(["simulate", "--cp", "4", "--seq", "1004"], "--cp:", "2 x cp = 8 chunks")
        self.expect_error(["simulate", "--cp", "0"], "--cp")
        self.expect_error(["plan", "--gpus", "6", "--global-batch", "6", "--seq", "4096", "--cp", "3"],
                          "--cp: the sequence (4096) is split into 2 x cp = 6 chunks")
        self.expect_error(["plan", "--gpus", "8", "--global-batch", "8", "--seq", "4096", "--cp", "16"],
                          "--cp: cp 16 must divide --gpus 8")
        self.expect_error(["simulate", "--cp", "2", "--attention", "unfused"], "--cp:", "--attention flash")
        self.expect_error([], "subcommand")
        self.expect_error(["simulate", "--seq", "16000000", "--microbatch-size", "64"], "--seq/--microbatch-size")
        self.expect_error(["simulate", "--pp", "4", "--dp", "1048576"], "--pp/--tp/--cp/--dp: pp*tp*cp*dp = 4194304 GPUs")
        self.expect_error(["simulate", "--microbatches", "16000000"], "--microbatches: 16000000 microbatches",
                          "valid: at most 1048576")
        self.expect_error(["simulate", "--global-batch", "1099511627776", "--pp", "2"], "--global-batch:",
                          "valid: at most 1048576")
        # Under the op-count guard but beyond the memory budget: refused before anything is built.
        self.expect_error(["simulate", "--schedule", "1f1b", "--microbatches", "100000", "--max-memory", "1"],
                          "--microbatches: about 4800000 ops", "over the 1.0 GiB budget")
        self.expect_error(["simulate", "--max-memory", "nan"], "--max-memory", "valid: 0")
        self.expect_error(["simulate", "--schedule", "spipe", "--spipe-stages", "2"], "--spipe-stages: expected F,B")
        self.expect_error(["simulate", "--schedule", "spipe", "--spipe-stages", "0,6"], "--spipe-stages")
        # llama3-8b has 32 blocks: 8 GPUs x 6 backward stages cannot each get one; the message names the
        # count that fails and what fits.
        self.expect_error(["simulate", "--schedule", "spipe", "--spipe-stages", "2,6"],
                          "--spipe-stages: 32 blocks cannot fill P x B = 8 x 6 = 48 backward stages",
                          "valid: F and B of 1 .. 4 (blocks / P), e.g. 2,4")
        self.expect_error(["simulate", "--schedule", "spipe", "--spipe-stages", "8,2"], "P x F = 8 x 8 = 64 forward")
        self.expect_error(["simulate", "--schedule", "spipe", "--pp", "64", "--hw", "h100-sxm-8x"],
                          "--pp: spipe gives every GPU at least one block: 32 blocks; valid: pp of 1 .. 32")
        self.expect_error(["simulate", "--schedule", "spipe", "--pp", "4", "--microbatches", "2"],
                          "--microbatches: spipe needs at least pp = 4 microbatches")
        self.expect_error(["simulate", "--schedule", "roundpipe", "--tp", "2"], "--tp: roundpipe runs one pipeline over the GPUs")
        self.expect_error(["simulate", "--schedule", "spipe", "--dp", "2"], "--dp: spipe runs one pipeline over the GPUs")
        self.expect_error(["simulate", "--schedule", "roundpipe", "--partition", "4,4"],
                          "--partition: roundpipe takes forward and backward layer counts")
        self.expect_error(["simulate", "--schedule", "roundpipe", "--partition", "4,4/2,3"],
                          "--partition: the forward stages hold 8 layers")
        self.expect_error(["simulate", "--schedule", "1f1b", "--partition", "4,4/2,3"],
                          "--partition: forward/backward lists are for schedules with separate")
        self.expect_error(["simulate", "--overflow-prob", "2"], "--overflow-prob")
        self.expect_error(["simulate", "--overflow-prob", "0.5x"], "--overflow-prob: '0.5x' is not a number")
        self.expect_error(["simulate", "--attention", "fused"], "--attention")
        self.expect_error(["simulate", "--grad-sync", "sometimes"], "--grad-sync")
        self.expect_error(["plan", "--gpus", "8", "--global-batch", "8", "--tp", "3"], "--tp: must divide --gpus 8")
        self.expect_error(["plan", "--gpus", "8", "--global-batch", "8", "--recompute", "most"], "--recompute")
        self.expect_error(["simulate", "--lora-rank", "-1"], "--lora-rank")
        self.expect_error(["simulate", "--iterations", "0"], "--iterations")
        self.expect_error(["simulate", "--hw", "v100-sxm2-4x", "--dtype", "bf16", "--schedule", "1f1b"],
                          "--dtype: v100-sxm2-4x has no bf16 peak; valid: fp16")
        self.expect_error(["simulate", "--hw", "a100-80g-sxm-8x", "--dtype", "fp8", "--schedule", "1f1b"],
                          "--dtype: a100-80g-sxm-8x has no fp8 peak; valid: bf16, fp16, fp32")
        self.expect_error(["simulate", "--dtype", "fp4"], "--dtype: unknown dtype 'fp4'", "fp8")
        self.expect_error(["simulate", "--hw", "gb200-nvl72", "--tp", "6", "--dp", "1", "--pp", "1",
                           "--schedule", "1f1b"],
                          "--tp: tp 6 must divide the 4 GPUs of a node or span whole nodes (NVLink domains of 18 "
                          "nodes of 4)")
        with tempfile.TemporaryDirectory() as d:  # a spec sheet with a typo
            bad = os.path.join(d, "spec.json")
            with open(os.path.join(SRC, "docs", "spec-sheet-h100.json")) as f, open(bad, "w") as g:
                g.write(f.read().replace('"hbm_TBps"', '"hbm_TBs"'))
            self.expect_error(["simulate", "--hw", bad], f"{bad}: /gpu/hbm_TBps: missing required key")
        self.expect_error(["simulate", "--model", "qwen3-235b-a22b", "--schedule", "roundpipe"],
                          "of weights and gradients, above RoundPipe's per-stage cap")
        self.expect_error(["simulate", "--model", "gpt-40b", "--hw", "h100-sxm-8x", "--pp", "16", "--tp", "8",
                           "--dp", "4096", "--microbatches", "64", "--replicas", "explicit"], "--replicas: about")

    def test_files(self):
        with tempfile.TemporaryDirectory() as d:
            def write(name, text):
                p = os.path.join(d, name)
                with open(p, "w") as f:
                    f.write(text)
                return p
            self.expect_error(["simulate", "--model", "nosuch"], "nosuch: unknown model preset; shipped:")
            self.expect_error(["simulate", "--hw", "nosuch"], "nosuch: unknown hardware profile; shipped:")
            self.expect_error(["simulate", "--model", os.path.join(d, "missing.json")], "missing.json: cannot open file")
            bad = write("bad.json", "{oops")
            self.expect_error(["simulate", "--model", bad], "bad.json: malformed JSON")
            def profile():
                with open(os.path.join(SRC, "hw_profiles", "rtx4090-8x.json")) as f:
                    return json.load(f)
            hw = profile()
            hw["gpu"]["hbm_gbps"] = 5
            self.expect_error(["simulate", "--hw", write("hw.json", json.dumps(hw))], "hw.json: /gpu/hbm_gbps: unknown key")
            hw = profile()
            hw["gpu"]["hbm_GBps"] = -1
            self.expect_error(["simulate", "--hw", write("hw2.json", json.dumps(hw))],
                              "hw2.json: /gpu/hbm_GBps: value -1 out of range")
            self.expect_error(["simulate", "--workload", write("w.json", '{"layers": [{"fwd_ms": "1", "bwd_ms": 2}]}')],
                              "w.json: /layers/0/fwd_ms: expected a number")
            self.expect_error(["simulate", "--workload", write("w2.json", '{"layers": [{"role": "neck", "fwd_ms": 1, "bwd_ms": 2}]}')],
                              "/layers/0/role: unknown role 'neck'; valid: embedding, block, head")
            self.expect_error(["simulate", "--plan", write("p.json", '{"format": "pipesim-plan", "version": 2}')],
                              "p.json: /version: unsupported version; valid: 1")
            self.expect_error(["simulate", "--model", write("m.json", '{"format": "pipesim-model", "version": 1, "name": "x"}')],
                              "m.json: /source: missing required key")

    def test_deadlocked_plan(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.json")
            rc, _, err = run("simulate", "--workload", os.path.join(FIXTURES, "uniform_workload.json"), "--pp", "2",
                             "--microbatches", "2", "--schedule", "1f1b", "--plan-out", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            with open(plan) as f:
                p = json.load(f)
            # Make stage 0's first forward wait for its own last backward: a cycle through stream order.
            first_fwd = next(i for i, o in enumerate(p["ops"]) if o["kind"] == "forward")
            last_bwd = max(i for i, o in enumerate(p["ops"]) if o["kind"] == "backward" and o["stream"] == p["ops"][first_fwd]["stream"])
            p["ops"][first_fwd]["deps"].append(last_bwd)
            with open(plan, "w") as f:
                json.dump(p, f)
            # The plan check names the cycle before anything runs.
            self.expect_error(["simulate", "--plan", plan], "the plan can never finish: a cycle",
                              f"op {first_fwd} forward", f"op {last_bwd} backward")
            self.expect_error(["explain", plan], "the plan can never finish")

    def test_collective_with_more_member_ops_than_its_size(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.json")
            rc, _, err = run("simulate", "--model", "llama2-7b", "--pp", "2", "--dp", "2", "--microbatches", "2",
                             "--schedule", "1f1b", "--replicas", "explicit", "--plan-out", plan, "--format", "json")
            self.assertEqual(rc, 0, err)
            with open(plan) as f:
                p = json.load(f)
            member = next(o for o in p["ops"] if o.get("transfer", {}).get("group", -1) >= 0)
            size, group = member["transfer"]["group_size"], member["transfer"]["group"]
            # One more member of the same collective on a stream of its own: it would start the group early.
            p["streams"].append({"device": p["streams"][member["stream"]]["device"], "kind": "collective",
                                 "name": "extra"})
            p["ops"].append(dict(member, stream=len(p["streams"]) - 1, deps=[]))
            with open(plan, "w") as f:
                json.dump(p, f)
            self.expect_error(["simulate", "--plan", plan],
                              f"plan.json: /ops/{len(p['ops']) - 1}/transfer/group: collective group {group} has "
                              f"{size + 1} member ops; valid: at most its group_size, {size}")


class Replay(unittest.TestCase):
    TINY = os.path.join(FIXTURES, "tiny_model.json")

    def test_replay_then_compare(self):
        with tempfile.TemporaryDirectory() as d:
            plan, pred, meas, trace = (os.path.join(d, f) for f in ("p.json", "pred.json", "meas.json", "t.json"))
            rc, _, err = run("simulate", "--model", self.TINY, "--hw", "h100-sxm-8x", "--pp", "2", "--microbatches",
                             "4", "--seq", "128", "--schedule", "1f1b", "--plan-out", plan, "--timeline", pred)
            self.assertEqual(rc, 0, err)
            rc, out, err = run("replay", plan, "--work-scale", "0.02", "--iterations", "2", "--out", meas,
                               "--trace", trace, "--format", "json")
            self.assertEqual(rc, 0, err)
            r = json.loads(out)
            self.assertEqual(r["environment"]["backend"], "host")
            self.assertEqual(len(r["environment"]["iteration_s"]), 2)
            self.assertGreater(r["measured_step_time_s"], 0)
            with open(meas) as f:
                m = json.load(f)
            self.assertEqual(m["format"], "pipesim-timeline")
            self.assertEqual(m["source"], "measured (host)")
            with open(pred) as f:
                self.assertEqual(len(m["ops"]), len(json.load(f)["ops"]))
            self.assertTrue(os.path.getsize(trace) > 0)
            rc, out, err = run("compare", pred, meas, "--format", "json")
            self.assertEqual(rc, 0, err)
            c = json.loads(out)
            self.assertAlmostEqual(c["step_time_error"],
                                   c["measured_step_time_s"] / c["predicted_step_time_s"] - 1, places=9)
            self.assertIn("advice", c)
            refit = os.path.join(d, "refit.json")
            rc, out, err = run("calibrate", "--from-replay", meas, "--plan", plan, "--out", refit)
            self.assertEqual(rc, 0, err)
            self.assertIn("GEMM efficiency from", out)
            with open(refit) as f:
                self.assertEqual(json.load(f)["format"], "pipesim-hw")
            rc, _, err = run("simulate", "--model", self.TINY, "--hw", refit, "--pp", "2", "--microbatches", "4",
                             "--seq", "128", "--schedule", "1f1b")
            self.assertEqual(rc, 0, err)
            rc, _, err = run("calibrate", "--from-replay", meas, "--out", refit)
            self.assertEqual(rc, 2)
            self.assertIn("--plan", err)

    def test_compare_synthetic_ten_percent(self):
        with tempfile.TemporaryDirectory() as d:
            def timeline(path, factor):
                ops, t = [], 0
                for i, kind in enumerate(["forward", "p2p", "backward", "optimizer"]):
                    dur = 1_000_000 * (i + 1) * factor // 10
                    ops.append({"op": i, "kind": kind, "stream": i % 2, "start_ns": t, "end_ns": t + dur})
                    t += dur
                with open(path, "w") as f:
                    json.dump({"format": "pipesim-timeline", "version": 1, "source": "synthetic",
                               "metrics": {"step_time_s": t / 1e9, "bubble_fraction": 0.2}, "ops": ops}, f)
            a, b = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            timeline(a, 10)
            timeline(b, 11)
            rc, out, err = run("compare", a, b, "--format", "json")
            self.assertEqual(rc, 0, err)
            c = json.loads(out)
            self.assertAlmostEqual(c["step_time_error"], 0.1, places=12)
            for k in c["op_kinds"]:
                self.assertAlmostEqual(k["median_error"], 0.1, places=12)

    def test_two_nodes_over_mpi(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            self.skipTest("mpirun not installed (scripts/install-deps.sh installs openmpi-bin)")
        with tempfile.TemporaryDirectory() as d:
            plan, pred, meas = (os.path.join(d, f) for f in ("p.json", "pred.json", "meas.json"))
            # tp 4 x pp 4 on 8-GPU nodes: stages 0-1 on node 0, stages 2-3 on node 1.
            rc, _, err = run("simulate", "--model", self.TINY, "--hw", "h100-sxm-8x", "--tp", "4", "--pp", "4",
                             "--microbatches", "8", "--seq", "128", "--schedule", "1f1b", "--plan-out", plan,
                             "--timeline", pred)
            self.assertEqual(rc, 0, err)
            with open(plan) as f:
                p = json.load(f)
            self.assertEqual(sorted({dev["node"] for dev in p["devices"]}), [0, 1])
            # One machine: OpenMPI's isolated launcher needs no ssh.
            cmd = [mpirun, "--mca", "plm", "isolated", "--allow-run-as-root", "--oversubscribe", "-np", "2", PIPESIM,
                   "replay", plan, "--mpi",
                   "--work-scale", "0.02", "--iterations", "2", "--timeout-s", "60", "--out", meas]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=MPI_ENV)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("2 nodes over MPI", out.stdout)
            with open(meas) as f:
                m = json.load(f)
            # Every op of both nodes ran, after each of its dependencies (on one clock).
            for i, op in enumerate(p["ops"]):
                self.assertGreaterEqual(m["ops"][i]["start_ns"], 0)
                for dep in op.get("deps", []):
                    self.assertGreaterEqual(m["ops"][i]["start_ns"], m["ops"][dep]["end_ns"], (i, dep))
            # The wrong number of processes is refused in one line.
            rc, _, err = run("replay", plan, "--mpi", "--work-scale", "0.02", env=MPI_ENV)
            self.assertEqual(rc, 2)
            self.assertIn("mpirun -np 2", err)

    def test_bad_input(self):
        rc, _, err = run("replay", "/nonexistent/plan.json")
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/plan.json", err)
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "p.json")
            run("simulate", "--model", self.TINY, "--pp", "2", "--microbatches", "2", "--seq", "64", "--schedule",
                "gpipe", "--plan-out", plan)
            for args, needle in [(["--backend", "cuda"], "did not run"), (["--backend", "tpu"], "valid: host, cuda"),
                                 (["--work-scale", "2"], "--work-scale"), (["--iterations", "0"], "--iterations")]:
                rc, _, err = run("replay", plan, *args)
                self.assertEqual(rc, 2, args)
                self.assertIn(needle, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write('{"format": "pipesim-timeline", "version": 1, "metrics": {"step_time_s": 1, '
                        '"bubble_fraction": 0}, "ops": [{"op": 0, "kind": "forward", "stream": 0, "start_ns": 0}]}')
            rc, _, err = run("compare", bad, bad)
            self.assertEqual(rc, 2)
            self.assertIn("/ops/0/end_ns", err)


if __name__ == "__main__":
    unittest.main(verbosity=1)
