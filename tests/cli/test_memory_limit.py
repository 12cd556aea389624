#!/usr/bin/env python3
"""pipesim under a low memory limit (`ulimit -v`): every shipped input either runs or is refused in one line
with exit 2 — never a crash, `bad_alloc` or exit 1.

Usage: test_memory_limit.py PIPESIM [LIMIT_MIB]
The binary must be built without AddressSanitizer (which reserves terabytes of address space and cannot
start under an address-space limit): ./test.sh runs this against the Release build.
"""
import json
import os
import resource
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run(pipesim, limit_bytes, args):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    out = subprocess.run([pipesim] + args, capture_output=True, text=True, preexec_fn=limit, timeout=600)
    return out.returncode, out.stdout, out.stderr


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    limit_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    limit = limit_mib << 20
    with open(pipesim, "rb") as f:
        if b"AddressSanitizer" in f.read():
            raise SystemExit(f"{pipesim} is built with AddressSanitizer, which cannot start under an "
                             "address-space limit; run this against a Release build")
    models = sorted(n[:-5] for n in os.listdir(os.path.join(SRC, "models")) if n.endswith(".json"))
    hws = sorted(n[:-5] for n in os.listdir(os.path.join(SRC, "hw_profiles")) if n.endswith(".json"))
    cases = [["simulate", "--model", m, "--hw", hw, "--format", "json"] for m in models for hw in hws[:3]]
    cases += [["simulate", "--model", m, "--schedule", s, "--format", "json"]
              for m in models[:4] for s in ("mobius", "roundpipe", "spipe")]
    cases += [["bubbles", "--model", "llama2-7b", "--pp", "4", "--schedule", "1f1b"],
              ["plan", "--model", "llama3-8b", "--hw", "h100-sxm-8x", "--gpus", "64", "--global-batch", "256"],
              ["partition", "--model", "llama2-13b", "--pp", "4"]]
    # Jobs far beyond the limit: refused up front, the budget following the limit.
    refused = [["simulate", "--model", "llama2-7b", "--schedule", "1f1b", "--microbatches", "100000"],
               ["simulate", "--model", "gpt3-175b", "--schedule", "1f1b", "--pp", "8", "--microbatches", "20000"],
               ["simulate", "--model", "llama2-7b", "--schedule", "roundpipe", "--microbatches", "100000"]]
    failures, ran, refusals = [], 0, 0
    for args in cases + refused:
        rc, out, err = run(pipesim, limit, args)
        lines = err.strip().splitlines()
        if rc == 0:
            ran += 1
        elif rc == 2 and len(lines) == 1 and lines[0].startswith("pipesim: error:"):
            refusals += 1
        else:
            failures.append(f"{' '.join(args)}: exit {rc}: {err.strip()[-300:]}")
        if args in refused and not (rc == 2 and "budget" in err):
            failures.append(f"{' '.join(args)}: expected a refusal naming the memory budget, got exit {rc}")
    print(f"under a {limit_mib} MiB address-space limit: {ran} ran, {refusals} refused in one line, "
          f"{len(failures)} failed")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
