#!/usr/bin/env python3
"""`pipesim import-trace` on a generated 1 GB trace under a 256 MiB address-space limit: the reader streams it
(nlohmann's SAX parser over zlib) and keeps only the events an import times, so memory does not grow with the
file. The trace is the 4-layer Qwen3 trace of tests/validation/traces/ with a gigabyte of Python-frame events
(with their arguments) woven in, gzip-compressed on the fly; the import must give the same workload as from the
original trace. Then the same with its execution trace (`--et`) grown to a gigabyte by what the reader skips (each
op's recorded shapes and strides): the workload must again be the original's.

Usage: test_trace_memory.py PIPESIM [GIB]
The binary must be built without AddressSanitizer (which cannot start under an address-space limit).
"""
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "..", "validation", "traces", "qwen3-1.7b-4layers.kineto.json.gz")
ET = os.path.join(HERE, "..", "validation", "traces", "qwen3-1.7b-4layers.et.json.gz")
LIMIT = 256 << 20


def write_big_trace(path, target_bytes):
    events = json.load(gzip.open(TRACE))["traceEvents"]
    filler = {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1750): _call_impl",
              "pid": 1, "tid": 1, "ts": 0.0, "dur": 0.5,
              "args": {"Python parent id": 7, "Python id": 8, "Input Dims": [[2048, 2048]] * 40,
                       "Concrete Inputs": ["", "1.0"] * 40}}
    blob = json.dumps(filler)
    per_event = max(1, target_bytes // len(blob) // len(events))
    written = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write('{"schemaVersion": 1, "traceEvents": [')
        chunk = ",".join([blob] * per_event)
        for i, e in enumerate(events):
            f.write(json.dumps(e))
            f.write(",")
            f.write(chunk)
            written += len(chunk)
            f.write("," if i + 1 < len(events) else "")
        f.write("]}")
    return written


def write_big_execution_trace(path, target_bytes):
    trace = json.load(gzip.open(ET))
    nodes = trace.pop("nodes")
    filler = json.dumps([[2048, 2048]] * 40)
    per_node = max(1, target_bytes // len(filler) // len(nodes))
    written = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(json.dumps(trace)[:-1] + ', "nodes": [')
        for i, node in enumerate(nodes):
            node["inputs"]["strides"] = "@"
            text = json.dumps(node).replace('"@"', "[" + ",".join([filler] * per_node) + "]")
            written += len(text)
            f.write(text + ("," if i + 1 < len(nodes) else ""))
        f.write("]}")
    return written


def same_workload(a_path, b_path):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    for w in (a, b):
        w.pop("source"), w.pop("name")
    return a == b


def expect_same_workload(pipesim, tmp, small_args, large_args, generated):
    """Imports the original and the grown trace (the latter under the memory limit): the same workload."""
    small_out, big_out = os.path.join(tmp, "small.json"), os.path.join(tmp, "big.json")
    small = run(pipesim, ["import-trace", *small_args, "--out", small_out])
    large = run(pipesim, ["import-trace", *large_args, "--out", big_out])
    print(f"{generated}; import under {LIMIT >> 20} MiB: exit {large.returncode}")
    if small.returncode != 0 or large.returncode != 0:
        print(small.stderr, large.stderr)
        sys.exit(1)
    if not same_workload(small_out, big_out):
        print("FAIL: the workload differs from the original trace's")
        sys.exit(1)


def run(pipesim, args):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
    return subprocess.run([pipesim] + args, capture_output=True, text=True, preexec_fn=limit, timeout=1200)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    gib = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "big.json.gz")
        written = write_big_trace(big, int(gib * (1 << 30)))
        expect_same_workload(pipesim, tmp, [TRACE], [big],
                             f"generated {written / 2**30:.2f} GiB of filler events "
                             f"({os.path.getsize(big) / 2**20:.0f} MiB compressed)")
        os.remove(big)
        big_et = os.path.join(tmp, "big.et.json.gz")
        written = write_big_execution_trace(big_et, int(gib * (1 << 30)))
        expect_same_workload(pipesim, tmp, [TRACE, "--et", ET], [TRACE, "--et", big_et],
                             f"generated a {written / 2**30:.2f} GiB execution trace "
                             f"({os.path.getsize(big_et) / 2**20:.0f} MiB compressed)")


if __name__ == "__main__":
    main()
