#!/usr/bin/env python3
"""Re-runs every `$ pipesim ...` example of README.md and replaces the output printed under it, so the README
shows what the current build prints. Usage: scripts/refresh_readme.py [path/to/pipesim] (default
build/cli/pipesim). The `explain best.json` example runs on the plan the Qwen3-32B `plan` example writes."""
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPESIM = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "pipesim"))


def run(command, cwd):
    args = shlex.split(command.split("#")[0])
    out = subprocess.run([PIPESIM] + args[1:], capture_output=True, text=True, cwd=cwd)
    if out.returncode != 0:
        raise SystemExit(f"{command}: {out.stderr.strip()}")
    return out.stdout


def main():
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        lines = f.read().split("\n")
    out, i = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        while i < len(lines):
            line = lines[i]
            out.append(line)
            i += 1
            if not line.startswith("$ pipesim"):
                continue
            command = line[2:]
            while command.endswith("\\"):  # continuation lines
                out.append(lines[i])
                command = command[:-1] + " " + lines[i].strip()
                i += 1
            if " plan " in command and "qwen3-32b" in command:
                run(command + " --out best.json", tmp)  # for the explain example
            printed = run(command, tmp).rstrip("\n").split("\n")
            while i < len(lines) and lines[i] != "```":  # the old output
                i += 1
            out.extend(printed)
    tmp_path = path + ".tmp"
    with open(tmp_path, "w") as f:
        f.write("\n".join(out))
    os.replace(tmp_path, path)


if __name__ == "__main__":
    main()
