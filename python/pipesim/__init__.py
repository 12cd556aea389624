"""pipesim from Python: the command line's subcommands as functions.

Every function takes the command line's options as keyword arguments (``--global-batch 32`` is
``global_batch=32``; a flag is ``True``; a list is joined with commas) and runs that command in this process
(the GIL is released meanwhile), so defaults, checks and results are exactly the command line's. Results are
the JSON the command prints with ``--format json``, as dicts and lists. Bad input raises ``ValueError`` with
the command line's one-line message; an unknown keyword raises ``TypeError`` naming the valid ones; a result
that breaks a physical invariant (pipesim's own bug: docs/invariants.md) raises ``InvariantError``.

    import pipesim
    r = pipesim.simulate(model="llama3-8b", hw="rtx4090-8x", pp=8, schedule="1f1b")
    r["step_time_s"], r["mfu"]
    tl = pipesim.timeline(model="llama3-8b", hw="rtx4090-8x", pp=8, schedule="1f1b")
    pandas.DataFrame(tl)        # one row per op: stream, device, kind, start_s, end_s, microbatch, ...
"""

import functools
import json
import os
import tempfile

import numpy as np

from . import _pipesim

__all__ = ["InvariantError", "check", "simulate", "timeline", "plan", "buy", "partition", "bubbles", "explain", "replay", "compare", "calibrate",
           "import_trace", "collectives",
           "load_plan", "load_timeline",
           "hw_profiles", "models", "frameworks", "schedules", "fill_jobs", "run", "sweep", "Timeline"]


class InvariantError(RuntimeError):
    """A result broke a physical invariant (exit code 3): a bug in pipesim, not in the input; no result is
    returned. The message names the invariant and its values."""


def _raise_for(code, err):
    if code == 3:
        raise InvariantError(err.strip())
    raise ValueError(err.strip())


def run(*args):
    """Runs ``pipesim ARGS...`` in this process; returns (exit code, stdout, stderr)."""
    return _pipesim.run([str(a) for a in args])


@functools.lru_cache(maxsize=None)
def _options(command):
    return dict(_pipesim.options(command))


def _arguments(command, kwargs):
    """The command line for `command` with `kwargs`, checked against the command's own options."""
    options = _options(command)
    args = [command]
    for key, value in kwargs.items():
        if value is None:
            continue
        name = "--" + key.replace("_", "-")
        negated = "--no-" + name[2:]
        if name not in options and negated in options and isinstance(value, bool):
            if not value:  # e.g. sequence_parallel=False: the command line spells it --no-sequence-parallel
                args.append(negated)
            continue
        if name not in options:
            valid = ", ".join(sorted(o[2:].replace("-", "_") for o in options))
            raise TypeError(f"{command}() got an unexpected keyword argument '{key}'; valid: {valid}")
        if options[name]:  # a flag: True gives it; False gives its --no- form where there is one
            if not isinstance(value, bool):
                raise TypeError(f"{command}(): '{key}' is a flag: give True or False")
            if value:
                args.append(name)
            elif negated in options:
                args.append(negated)
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        args += [name, str(value)]
    return args


def _run_json(command, kwargs):
    code, out, err = _pipesim.run(_arguments(command, dict(kwargs, format="json")))
    if code != 0:
        _raise_for(code, err)
    return json.loads(out)


def simulate(**kwargs):
    """``pipesim simulate``: step time, throughput, bubbles and memory of a job. A dict (a list of dicts with
    ``schedule="all"``), keyed as ``pipesim simulate --format json``."""
    return _run_json("simulate", kwargs)


def plan(**kwargs):
    """``pipesim plan``: the best parallel configurations for a model on N GPUs, best first."""
    return _run_json("plan", kwargs)


def buy(**kwargs):
    """``pipesim buy``: the best configuration on every candidate cluster (``hw="h100-sxm-8x,b200-sxm-8x"``,
    ``gpus="256,1024"``) with the steps, time and dollars to train ``tokens``; the JSON of ``--format json``."""
    return _run_json("buy", kwargs)


def partition(**kwargs):
    """``pipesim partition``: the optimal layer partition for a schedule, against uniform and DeepSpeed's."""
    return _run_json("partition", kwargs)


def bubbles(**kwargs):
    """``pipesim bubbles``: every GPU's idle intervals in a simulated step."""
    return _run_json("bubbles", kwargs)


def collectives(**kwargs):
    """``pipesim collectives``: one collective alone at each message size on a hardware profile, as nccl-tests
    reports it (``hw="rtx4090-8x", min_bytes="1M", max_bytes="128M"``): a dict with ``sizes``, each with
    ``bytes``, ``time_us``, ``algbw_GBps``, ``busbw_GBps`` and the ``algorithm``."""
    return _run_json("collectives", kwargs)


def _run_positional_json(command, positionals, kwargs):
    code, out, err = _pipesim.run(_arguments(command, dict(kwargs, format="json")) + [str(p) for p in positionals])
    if code != 0:
        _raise_for(code, err)
    return json.loads(out)


def explain(plan_file, **kwargs):
    """``pipesim explain PLAN``: a saved plan checked, simulated and its critical path reported."""
    return _run_positional_json("explain", [plan_file], kwargs)


def replay(plan_file, **kwargs):
    """``pipesim replay PLAN``: the saved plan executed on this machine (``backend="host"`` by default);
    ``out=PATH`` keeps the measured timeline for ``compare`` and ``calibrate(from_replay=...)``."""
    return _run_positional_json("replay", [plan_file], kwargs)


def compare(predicted, measured, **kwargs):
    """``pipesim compare PREDICTED MEASURED``: two timelines of one plan side by side (step-time error,
    per-kind and per-op errors, what to recalibrate first)."""
    return _run_positional_json("compare", [predicted, measured], kwargs)


def import_trace(trace_file, **kwargs):
    """``pipesim import-trace TRACE --out FILE``: a PyTorch profiler trace of one training step (Kineto JSON,
    plain or gzip) into a profiled workload written to ``out`` (``simulate(workload=out, ...)``, ``plan``,
    ``partition`` and ``bubbles`` read it); returns the import's report: each layer's forward and backward GPU
    time, launches, parameters and FLOPs, how long the GPU waited for the CPU before each pass's kernels
    (``host_wait_ms``: the step replayed with the profiler's own cost per recorded event taken out,
    ``profiler_op_us`` and ``profiler_python_us``, or fitted to ``measured_step_ms``, the same step timed
    without the profiler), the optimizer, and the kernel time by class. A trace recorded with
    ``profile_memory=True`` also gives each layer's activation memory (``saved_bytes``, ``memory_source``
    "memory events") and the step's ``peak_allocated_bytes`` and ``peak_reserved_bytes``; ``et=PATH`` reads the matching execution trace
    for them instead (``memory_source`` "execution trace"); ``step=N`` imports ProfilerStep#N of a trace that
    marks several (default: the last), ``all_steps=True`` their mean."""
    return _run_positional_json("import-trace", [trace_file], kwargs)


def check(result_file, plan=None):
    """``pipesim check RESULT [--plan PLAN]``: a saved result (``simulate`` JSON or a timeline) held to the
    invariants; returns the command's one-line verdict, raises ``InvariantError`` naming the first broken."""
    code, out, err = _pipesim.run(["check", str(result_file)] + (["--plan", str(plan)] if plan else []))
    if code != 0:
        _raise_for(code, err)
    return out.strip()


def calibrate(**kwargs):
    """``pipesim calibrate``: measures this machine (or, with ``replay_host=True``, describes the host replay
    backend; with ``from_replay=`` and ``plan=``, refits a profile from a replay; with ``from_trace=``, from a
    PyTorch profiler trace, and ``framework_out=`` writes the framework with the trace's CPU time a launch and
    its layers' launches) and writes the profile to ``out``; returns the written profile as a dict. What the command reports goes to
    ``report`` in it."""
    code, out, err = _pipesim.run(_arguments("calibrate", kwargs))
    if code != 0:
        _raise_for(code, err)
    with open(kwargs["out"], encoding="utf-8") as f:
        profile = json.load(f)
    profile["report"] = (out + err).strip()
    return profile


def _listing(command):
    code, out, err = _pipesim.run([command, "--format", "json"])
    if code != 0:
        _raise_for(code, err)
    return json.loads(out)


def hw_profiles():
    """The shipped hardware profiles (``pipesim hw``)."""
    return _listing("hw")


def models():
    """The shipped model presets (``pipesim models``)."""
    return _listing("models")


def frameworks():
    """The shipped training frameworks and their settings (``pipesim frameworks``; ``framework=`` on
    simulate, plan, buy, partition and bubbles)."""
    return _listing("frameworks")


def schedules():
    """The registered schedules and their parameters (``pipesim schedules``)."""
    return _listing("schedules")


def fill_jobs():
    """The shipped fill jobs (``pipesim fill-jobs``)."""
    return _listing("fill-jobs")


def load_plan(path):
    """A saved plan (``simulate --plan-out``) as the dict of its JSON (``simulate(plan=path)`` and
    ``explain(path)`` run it through the loader's full checks)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("format") != "pipesim-plan":
        raise ValueError(f"{path}: not a pipesim-plan file")
    return data


class Timeline(dict):
    """A simulated run as columns (numpy arrays of equal length, one entry per op), which
    ``pandas.DataFrame(timeline)`` takes directly; ``devices`` (name, kind, node, resident bytes, one entry
    per device) and ``metrics`` (the run's results) ride along as attributes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.devices = {}
        self.metrics = {}


_KIND_ORDER = ("gpu", "host", "nvme")


def load_timeline(path, plan=None):
    """A timeline file (``simulate --timeline``) as a ``Timeline``; with the plan it was simulated from (a
    path or a ``load_plan`` dict), ops also get their device, stream kind, memory effects and tags."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("format") != "pipesim-timeline":
        raise ValueError(f"{path}: not a pipesim-timeline file")
    ops = data["ops"]
    tl = Timeline()
    tl["op"] = np.array([o["op"] for o in ops], dtype=np.int64)
    tl["kind"] = np.array([o["kind"] for o in ops], dtype=object)
    tl["stream"] = np.array([o["stream"] for o in ops], dtype=np.int64)
    tl["start_s"] = np.array([o["start_ns"] for o in ops], dtype=np.float64) / 1e9
    tl["end_s"] = np.array([o["end_ns"] for o in ops], dtype=np.float64) / 1e9
    tl.metrics = data.get("metrics", {})
    if plan is not None:
        p = load_plan(plan) if isinstance(plan, (str, os.PathLike)) else plan
        streams, plan_ops = p["streams"], p["ops"]
        if len(plan_ops) != len(ops):
            raise ValueError(f"{path}: {len(ops)} ops, but the plan has {len(plan_ops)}")
        device_of = [s["device"] for s in streams]
        tl["device"] = np.array([device_of[o["stream"]] for o in ops], dtype=np.int64)
        tl["device_name"] = np.array([p["devices"][d]["name"] for d in tl["device"]], dtype=object)
        tl["stream_kind"] = np.array([streams[o["stream"]]["kind"] for o in ops], dtype=object)
        by_id = [plan_ops[o["op"]] for o in ops]
        for key in ("alloc_bytes", "free_bytes"):
            tl[key] = np.array([o.get(key, 0) for o in by_id], dtype=np.int64)
        for key in ("stage", "microbatch", "iteration"):
            tl[key] = np.array([o.get("tags", {}).get(key, -1) for o in by_id], dtype=np.int64)
        tl.devices = {k: np.array([d.get(k, 0) for d in p["devices"]]) for k in
                      ("name", "kind", "node", "resident_bytes")}
    return tl


def timeline(**kwargs):
    """``pipesim simulate`` of one schedule, returned as a ``Timeline`` with the plan's details per op."""
    if kwargs.get("schedule") == "all":
        raise ValueError("timeline(): give one schedule, not 'all'")
    with tempfile.TemporaryDirectory(prefix="pipesim-") as tmp:
        tl_path, plan_path = os.path.join(tmp, "timeline.json"), os.path.join(tmp, "plan.json")
        _run_json("simulate", dict(kwargs, timeline=tl_path, plan_out=plan_path))
        return load_timeline(tl_path, plan_path)


from .sweeps import sweep  # noqa: E402 (it uses simulate, defined above)
