#!/usr/bin/env python3
"""Fails when timed work could run on constant or zero data: in calibrate/ and replay/, every device or pinned
allocation and every memset must go through calibrate/include/pipesim/calibrate/timed_buffers.cuh (which
fills buffers with operand_values.hpp's pseudo-random operands). A line that must allocate otherwise (the
plan's memory effects, an allocation whose time is measured before it is filled) says why in a
`// timed-buffers:` comment on the line before it.

    scripts/check-timed-buffers.py [ROOT]
"""
import os
import re
import sys

RAW = re.compile(r"\b(cudaMalloc|cudaMallocHost|cudaHostAlloc|cudaMallocAsync|cudaMallocManaged|cudaMemset\w*|"
                 r"cuMemAlloc\w*|memset|std::fill|std::fill_n)\s*\(")
HELPERS = "calibrate/include/pipesim/calibrate/timed_buffers.cuh"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    failures = []
    for top in ("calibrate", "replay"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".cu", ".cuh", ".cpp", ".hpp")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                if rel == HELPERS:
                    continue
                lines = open(path, encoding="utf-8").read().split("\n")
                for i, line in enumerate(lines):
                    code = line.split("//")[0]
                    if not RAW.search(code):
                        continue
                    if i > 0 and "timed-buffers:" in lines[i - 1]:
                        continue
                    failures.append(f"{rel}:{i + 1}: {line.strip()}")
    for f in failures:
        print(f"check-timed-buffers: raw allocation or fill outside {HELPERS}: {f}", file=sys.stderr)
    if failures:
        return 1
    print("check-timed-buffers: every timed buffer is allocated and filled with random operands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
