#!/usr/bin/env python3
"""Fails when a lower folder includes a higher one. The layers, lowest first, are written once, here; a
folder may include its own layer and those below it. Within sim/, a concern's public headers
(sim/include/pipesim/sim/<concern>/) and its sources (sim/src/<concern>/) are one layer.

    scripts/check-layers.py [ROOT]
"""
import os
import re
import sys

# Lowest first. sim's concerns, then the libraries above the simulator, then the programs.
LAYERS = [
    "sim/core",
    "sim/hardware",
    "sim/workload",
    "sim/plan",
    "sim/engine",
    "sim/report",
    "sim/schedules",
    "sim/fill",
    "sim/job",
    "calibrate",
    "planner",
    "replay",
    "trace_import",
    "cli",
    "python",
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_file(path):
    """The layer of a source or header file (path relative to the root), or None outside the layers."""
    parts = path.split("/")
    if parts[0] == "sim":
        if parts[1] == "src" and len(parts) > 3:
            return "sim/" + parts[2]
        if parts[1:4] == ["include", "pipesim", "sim"] and len(parts) > 5:
            return "sim/" + parts[4]
        return None
    return parts[0] if parts[0] in LAYERS else None


def layer_of_include(name, own):
    """The layer an include names: "pipesim/sim/<concern>/x.hpp", a private "<concern>/x.hpp" of sim/src,
    "pipesim/<library>/x.hpp", or a header of the including folder itself."""
    parts = name.split("/")
    if parts[:2] == ["pipesim", "sim"] and len(parts) > 3:
        return "sim/" + parts[2]
    if parts[0] == "pipesim" and len(parts) > 2:
        return parts[1] if parts[1] in LAYERS else None
    if own.startswith("sim/") and "sim/" + parts[0] in LAYERS and len(parts) > 1:
        return "sim/" + parts[0]
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    rank = {name: i for i, name in enumerate(LAYERS)}
    problems = []
    checked = 0
    for top in ["sim", "calibrate", "planner", "replay", "cli", "python"]:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".cpp", ".hpp", ".h", ".def")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                own = layer_of_file(path)
                if own is None:
                    if path.startswith("sim/"):
                        problems.append(f"{path}: not in a concern's folder (sim/src/<concern>/ or "
                                        f"sim/include/pipesim/sim/<concern>/)")
                    continue
                checked += 1
                with open(os.path.join(root, path), encoding="utf-8") as text:
                    for number, line in enumerate(text, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = layer_of_include(m.group(1), own)
                        if target is not None and rank[target] > rank[own]:
                            problems.append(f"{path}:{number}: {own} includes {m.group(1)} of {target}, a higher "
                                            f"layer (order, lowest first: {', '.join(LAYERS)})")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"layers: {checked} files, no folder includes a higher one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
